// The admin UI's only script, no build step. Pages work without it; it adds confirmations,
// live progress (send and import) and the editor's live preview.
"use strict";

// Forms with data-confirm ask before they post (delete, send, sign out everywhere).
document.addEventListener("submit", (event) => {
  const form = event.target;
  const question = form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});

// Elements with data-progress-url poll it (JSON) and fill the progress bar and its labels;
// when the JSON says done, the page reloads to show the outcome.
function followProgress(panel) {
  const url = panel.getAttribute("data-progress-url");
  const bar = panel.querySelector("progress");
  const label = (name) => panel.querySelector(`[data-field="${name}"]`);
  async function poll() {
    let state;
    try {
      const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!response.ok) throw new Error(String(response.status));
      state = await response.json();
    } catch (error) {
      window.setTimeout(poll, 3000);
      return;
    }
    if (state.total > 0) {
      bar.max = state.total;
      bar.value = state.completed;
    }
    for (const [name, value] of Object.entries(state.labels || {})) {
      const element = label(name);
      if (element) element.textContent = value;
    }
    if (state.done) {
      bar.max = Math.max(state.total, 1);
      bar.value = bar.max;
      window.setTimeout(() => window.location.reload(), 600);
      return;
    }
    window.setTimeout(poll, 1000);
  }
  poll();
}
document.querySelectorAll("[data-progress-url]").forEach(followProgress);

// The campaign editor: saving the draft (debounced) re-renders every preview frame.
function livePreview(form) {
  let timer = null;
  const status = form.querySelector("[data-preview-status]");
  async function save() {
    const body = new URLSearchParams(new FormData(form));
    const response = await fetch(form.getAttribute("data-preview-save"), {
      method: "POST",
      body,
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    });
    const answer = await response.json().catch(() => ({ error: "could not save" }));
    if (status) status.textContent = answer.error ? `Not saved: ${answer.error}` : "Saved; preview updated.";
    if (!answer.error) {
      document.querySelectorAll("iframe[data-preview]").forEach((frame) => {
        const url = new URL(frame.src, window.location.href);
        url.searchParams.set("v", String(Date.now()));
        frame.src = url.toString();
      });
    }
  }
  form.addEventListener("input", () => {
    window.clearTimeout(timer);
    timer = window.setTimeout(save, 700);
  });
}
document.querySelectorAll("form[data-preview-save]").forEach(livePreview);
