"""A path id holding a NUL is refused as "no such id" only to a caller the service knows.

The check runs before a route's own dependencies, so it answered 404 to a request with no token,
or a bad one: a caller without a good token learnt how ids are judged before being refused.
"""

from __future__ import annotations

import pytest

from tests.service.apptools import bearer, served

_PATHS = ["/api/runs/%00", "/api/runs/a%00b", "/api/approvals/%00"]


@pytest.mark.parametrize("path", _PATHS)
@pytest.mark.parametrize("token", [None, "admin-token-forged", "admin-token\x00"])
def test_a_nul_id_without_a_good_token_is_401_before_anything_else(path: str, token: str | None) -> None:
    with served() as (client, _rt, _world, _signalling, _app):
        headers = {} if token is None else {"authorization": f"Bearer {token}"}
        answer = client.get(path, headers=headers)
    assert answer.status_code == 401, (path, answer.status_code, answer.text)
    assert answer.json()["error"]["category"] == "permission_denied"


@pytest.mark.parametrize("path", _PATHS)
def test_a_nul_id_with_a_good_token_is_still_no_such_id(path: str) -> None:
    with served() as (client, _rt, _world, _signalling, _app):
        answer = client.get(path, headers=bearer("admin-token"))
    assert answer.status_code == 404, (path, answer.text)
    assert "NUL" in answer.json()["error"]["message"]
