"""A small local document store on SQLite: annual reports, news summaries and reference FX rates.

It is the environment of scenario 4. Search ranks the newest document first, so a news summary
published after an annual report comes before it; a summary names the report it summarises.
The companies and figures are fictional.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actionspace.demo._sqlite import SqliteService

__all__ = ["DocumentStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    id TEXT PRIMARY KEY, company TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('annual_report', 'news_summary')),
    title TEXT NOT NULL, publisher TEXT NOT NULL, published TEXT NOT NULL, fiscal_year INTEGER NOT NULL,
    currency TEXT NOT NULL, revenue_m REAL NOT NULL, summarises TEXT REFERENCES documents(id));
CREATE TABLE IF NOT EXISTS fx_rates (
    base TEXT NOT NULL, quote TEXT NOT NULL, fiscal_year INTEGER NOT NULL, rate REAL NOT NULL,
    source TEXT NOT NULL, PRIMARY KEY (base, quote, fiscal_year));
"""

_DOCUMENTS = [
    ("nw-ar-2024", "Nordwind AG", "annual_report", "Nordwind AG Annual Report 2024", "Nordwind AG",
     "2025-03-14", 2024, "EUR", 38940.0, None),
    ("nw-ar-2025", "Nordwind AG", "annual_report", "Nordwind AG Annual Report 2025", "Nordwind AG",
     "2026-03-12", 2025, "EUR", 41230.0, None),
    ("pl-ar-2024", "Pacific Loom Inc.", "annual_report", "Pacific Loom Inc. Annual Report FY2024",
     "Pacific Loom Inc.", "2025-02-25", 2024, "USD", 43105.0, None),
    ("pl-ar-2025", "Pacific Loom Inc.", "annual_report", "Pacific Loom Inc. Annual Report FY2025",
     "Pacific Loom Inc.", "2026-02-26", 2025, "USD", 46812.0, None),
    ("pl-news-2025", "Pacific Loom Inc.", "news_summary", "Pacific Loom revenue tops $47 billion",
     "Market Wire", "2026-03-20", 2025, "USD", 47000.0, "pl-ar-2025"),
]  # fmt: skip

_RATES = [
    ("USD", "EUR", 2024, 0.9239, "reference rate, 2024 annual average"),
    ("USD", "EUR", 2025, 0.9231, "reference rate, 2025 annual average"),
]


class DocumentStore(SqliteService):
    """The store's own API over one SQLite file (WAL; one connection per thread)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, _SCHEMA)

    def seed(self) -> None:
        """Two companies' annual reports for two fiscal years, one news summary and the FX rates."""
        with self._tx() as db:
            db.executemany(
                "INSERT OR REPLACE INTO documents VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", _DOCUMENTS
            )
            db.executemany("INSERT OR REPLACE INTO fx_rates VALUES (?, ?, ?, ?, ?)", _RATES)

    def search(self, company: str, *, limit: int = 5) -> list[dict[str, Any]]:
        """Documents about companies whose name contains ``company`` (case-insensitive), newest first."""
        rows = self._conn().execute(
            "SELECT * FROM documents WHERE lower(company) LIKE ? ORDER BY published DESC, id LIMIT ?",
            (f"%{company.lower()}%", limit),
        )
        return [dict(r) for r in rows]

    def document(self, doc_id: str) -> dict[str, Any] | None:
        row = self._conn().execute("SELECT * FROM documents WHERE id = ?", (doc_id,)).fetchone()
        return dict(row) if row else None

    def latest_report(self, company: str) -> dict[str, Any] | None:
        """The company's annual report with the latest fiscal year."""
        row = (
            self._conn()
            .execute(
                "SELECT * FROM documents WHERE company = ? AND kind = 'annual_report'"
                " ORDER BY fiscal_year DESC LIMIT 1",
                (company,),
            )
            .fetchone()
        )
        return dict(row) if row else None

    def rate(self, base: str, quote: str, fiscal_year: int) -> tuple[float, str] | None:
        """``(rate, source)`` converting ``base`` into ``quote`` for a fiscal year; None if not documented."""
        if base == quote:
            return 1.0, "same currency"
        row = (
            self._conn()
            .execute(
                "SELECT rate, source FROM fx_rates WHERE base = ? AND quote = ? AND fiscal_year = ?",
                (base, quote, fiscal_year),
            )
            .fetchone()
        )
        return (float(row[0]), str(row[1])) if row else None
