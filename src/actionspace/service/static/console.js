/* actionspace console: routing between the pages, the token form, start-up.
 *
 * Plain browser JavaScript modules: no build step, nothing fetched from another origin.
 */

import { TOKEN_KEY, nextSerial, isCurrent, takeTokenFromUrl, token, ApiError, h, show, link, notice, errorText, refreshPendingCount } from "./core.js";
import { approvalsPage } from "./approvals.js";
import { overviewPage, runPage, runsPage } from "./runs.js";
import { toolPage, toolsPage } from "./tools.js";
import { ledgerPage } from "./ledger.js";

// ------------------------------------------------------------------ routing
const routes = [
  [/^\/$/, overviewPage, "overview"],
  [/^\/approvals\/?$/, approvalsPage, "approvals"],
  [/^\/runs\/?$/, runsPage, "runs"],
  [/^\/runs\/([^/]+)\/?$/, runPage, "runs"],
  [/^\/tools\/?$/, toolsPage, "tools"],
  [/^\/tools\/([^/]+)\/?$/, toolPage, "tools"],
  [/^\/ledger\/?$/, ledgerPage, "ledger"],
];

function navigate(href) {
  history.pushState(null, "", href);
  render();
}

async function render() {
  const serial = nextSerial();
  const view = document.getElementById("view");
  const path = window.location.pathname;
  let page = notFoundPage;
  let args = [];
  let section = "";
  for (const [pattern, fn, name] of routes) {
    const match = pattern.exec(path);
    if (match) {
      try {
        args = match.slice(1).map(decodeURIComponent);
      } catch (_) {  // a malformed %-escape names no page
        break;
      }
      page = fn;
      section = name;
      break;
    }
  }
  for (const a of document.querySelectorAll("[data-nav]")) {
    a.classList.toggle("active", a.getAttribute("data-nav") === section);
  }
  if (!token()) {
    showTokenForm(view, null);
    return;
  }
  document.getElementById("sign-out").hidden = false;
  try {
    await page(view, serial, ...args);
    refreshPendingCount();
  } catch (err) {
    if (!isCurrent(serial)) return;
    if (err instanceof ApiError && err.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      showTokenForm(view, "The token was not accepted: " + err.message);
    } else {
      show(view, notice(errorText(err), true));
    }
  }
}

function showTokenForm(view, problem) {
  document.getElementById("sign-out").hidden = true;
  const form = document.getElementById("token-form").content.cloneNode(true);
  show(view, form);
  const errorLine = document.getElementById("token-error");
  if (problem) {
    errorLine.textContent = problem;
    errorLine.hidden = false;
  }
  document.getElementById("token-entry").addEventListener("submit", function (event) {
    event.preventDefault();
    const value = document.getElementById("token-input").value.trim();
    if (value) {
      sessionStorage.setItem(TOKEN_KEY, value);
      render();
    }
  });
}

function notFoundPage(view) {
  show(view, h("h1", null, "Not found"), h("p", null, link("/", "Back to the overview")));
}

// ------------------------------------------------------------------ start
function start() {
  takeTokenFromUrl();
  document.addEventListener("click", function (event) {
    const a = event.target.closest ? event.target.closest("a[data-link]") : null;
    if (!a || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
    const url = new URL(a.href, window.location.href);
    if (url.origin !== window.location.origin) return;
    event.preventDefault();
    navigate(url.pathname + url.search);
  });
  window.addEventListener("popstate", render);
  document.getElementById("sign-out").addEventListener("click", function () {
    sessionStorage.removeItem(TOKEN_KEY);
    render();
  });
  render();
}

start();
