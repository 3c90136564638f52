// The admin UI's only script, no build step. Pages work without it; it adds confirmations,
// live progress (send and import), the editor's autosave with its live preview and tabs.
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
  // The panel's labels, and the page's badge (data-field="stage"), from the same answer.
  const label = (name) => panel.querySelector(`[data-field="${name}"]`) || document.querySelector(`[data-field="${name}"]`);
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

// Forms with data-submit-once post once: a double-click on Send sends one request.
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (event.defaultPrevented || !form.hasAttribute("data-submit-once")) return;
  if (form.dataset.submitted) {
    event.preventDefault();
    return;
  }
  form.dataset.submitted = "yes";
});

// Mark the field a refusal names (aria-invalid, its message beside it), or clear the marks.
function markField(form, name, message) {
  form.querySelectorAll("[aria-invalid]").forEach((field) => {
    field.removeAttribute("aria-invalid");
    field.removeAttribute("aria-describedby");
  });
  form.querySelectorAll(".field-error").forEach((note) => note.remove());
  const field = name ? form.querySelector(`[name="${name}"]`) : null;
  if (!field || !message) return;
  const note = document.createElement("p");
  note.className = "field-error";
  note.id = `${name}-error`;
  note.textContent = message;
  field.insertAdjacentElement("afterend", note);
  field.setAttribute("aria-invalid", "true");
  field.setAttribute("aria-describedby", note.id);
}

// The campaign editor autosaves: typing saves the draft (debounced) and re-renders the
// preview. A refused save leaves the text in the page, marks the field and says why; leaving
// the page with unsaved text asks first.
function autosave(form) {
  let timer = null;
  let dirty = false;
  const status = form.querySelector("[data-preview-status]");
  async function save() {
    const body = new URLSearchParams(new FormData(form));
    let answer;
    try {
      const response = await fetch(form.getAttribute("data-preview-save"), {
        method: "POST",
        body,
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      });
      answer = await response.json();
    } catch (error) {
      answer = { error: "could not reach the server; your text is still here" };
    }
    if (answer.error) {
      markField(form, answer.field, answer.error);
      if (status) status.textContent = `Not saved: ${answer.error}`;
      return;
    }
    dirty = false;
    markField(form, null, null);
    if ("archive_public" in answer) {
      // A new audience filter may have decided the archive flag: show what was stored.
      const box = form.querySelector('[name="archive_public"]');
      const shown = form.querySelector('[name="archive_public_shown"]');
      if (box) box.checked = answer.archive_public;
      if (shown) shown.value = answer.archive_public ? "1" : "0";
    }
    if (status) status.textContent = "Saved; preview updated.";
    document.querySelectorAll("iframe[data-preview]").forEach((frame) => {
      const url = new URL(frame.src, window.location.href);
      url.searchParams.set("v", String(Date.now()));
      frame.src = url.toString();
    });
  }
  form.addEventListener("input", () => {
    dirty = true;
    window.clearTimeout(timer);
    timer = window.setTimeout(save, 700);
  });
  form.addEventListener("submit", () => {
    dirty = false;
  });
  window.addEventListener("beforeunload", (event) => {
    if (dirty) event.preventDefault();
  });
}
document.querySelectorAll("form[data-preview-save]").forEach(autosave);

// Preview tabs (segment, width): switch the one frame in place; the links still work alone.
function previewTab(link) {
  link.addEventListener("click", (event) => {
    const frame = document.querySelector("iframe[data-preview]");
    if (!frame) return;
    event.preventDefault();
    const kind = link.getAttribute("data-preview-tab");
    const value = link.getAttribute("data-value");
    document.querySelectorAll(`[data-preview-tab="${kind}"]`).forEach((tab) => {
      if (tab === link) tab.setAttribute("aria-current", "true");
      else tab.removeAttribute("aria-current");
    });
    frame.dataset[kind] = value;
    const segment = frame.dataset.segment;
    const width = frame.dataset.width;
    frame.className = `preview-frame preview-${width}`;
    frame.title = `${segment} version at ${width} width`;
    const url = new URL(frame.src, window.location.href);
    url.searchParams.set("segment", segment);
    frame.src = url.toString();
    const text = document.querySelector("a[data-preview-text]");
    if (text) {
      const textUrl = new URL(text.href, window.location.href);
      textUrl.searchParams.set("segment", segment);
      text.href = textUrl.toString();
    }
    document.querySelectorAll("[data-preview-tab]").forEach((tab) => {
      const tabUrl = new URL(tab.href, window.location.href);
      tabUrl.searchParams.set("segment", segment);
      tabUrl.searchParams.set("width", width);
      tabUrl.searchParams.set(tab.getAttribute("data-preview-tab"), tab.getAttribute("data-value"));
      tab.href = tabUrl.toString();
    });
  });
}
document.querySelectorAll("a[data-preview-tab]").forEach(previewTab);

// A form with data-max-bytes refuses a file over the limit before uploading it.
function tooLarge(form) {
  const limit = Number(form.getAttribute("data-max-bytes"));
  const input = form.querySelector('input[type="file"]');
  const file = input && input.files && input.files[0];
  if (!limit || !file || file.size <= limit) return null;
  return `the file is larger than ${limit.toLocaleString("en")} bytes`;
}
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!form.hasAttribute("data-max-bytes") || form.hasAttribute("data-media-upload")) return;
  const problem = tooLarge(form);
  if (problem) {
    event.preventDefault();
    markField(form, "file", problem);
  }
});

// The editor's image panel: an image of the library goes into the body at the cursor, only
// with alt text; an upload is posted in place (the draft stays open) and joins the list.
function escapeHtml(text) {
  return text.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
function mediaPanel(panel) {
  const insert = panel.querySelector("[data-media-insert]");
  const pick = panel.querySelector("#media_pick");
  const alt = panel.querySelector("#media_alt");
  const status = panel.querySelector("[data-media-status]");
  const upload = panel.querySelector("form[data-media-upload]");
  const body = document.getElementById("body");
  const format = document.getElementById("body_format");
  pick.addEventListener("change", () => {
    const chosen = pick.selectedOptions[0];
    alt.value = chosen && chosen.value ? chosen.dataset.alt : "";
    markField(insert, null, null);
  });
  panel.querySelector("[data-insert-image]").addEventListener("click", () => {
    const chosen = pick.selectedOptions[0];
    if (!chosen || !chosen.value) {
      markField(insert, "media_pick", "Choose an image first.");
      pick.focus();
      return;
    }
    const text = alt.value.trim();
    if (!text) {
      markField(insert, "media_alt", "An image goes in only with alt text: say what it shows.");
      alt.focus();
      return;
    }
    markField(insert, null, null);
    const snippet = format && format.value === "html"
      ? `<img src="${escapeHtml(chosen.dataset.url2x)}" alt="${escapeHtml(text)}" width="${chosen.dataset.width}" height="${chosen.dataset.height}">`
      : `![${text.replace(/([\\[\]])/g, "\\$1")}](${chosen.dataset.url})`;
    const start = body.selectionStart;
    const lead = start > 0 && body.value[start - 1] !== "\n" ? "\n\n" : "";
    body.setRangeText(`${lead}${snippet}\n\n`, start, body.selectionEnd, "end");
    body.dispatchEvent(new Event("input", { bubbles: true }));
    status.textContent = `Inserted “${text}” into the body.`;
  });
  upload.addEventListener("submit", async (event) => {
    event.preventDefault();
    const problem = tooLarge(upload);
    if (problem) {
      markField(upload, "file", problem);
      return;
    }
    let answer;
    try {
      const response = await fetch(upload.action, {
        method: "POST",
        body: new FormData(upload),
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      });
      answer = await response.json();
    } catch (error) {
      answer = { error: "the upload did not reach the server", field: "file" };
    }
    if (answer.error) {
      markField(upload, answer.field || "file", answer.error);
      return;
    }
    markField(upload, null, null);
    let option = pick.querySelector(`option[value="${answer.id}"]`);
    if (!option) {
      option = document.createElement("option");
      option.value = String(answer.id);
      option.textContent = `${answer.filename} — ${answer.alt}`;
      pick.insertBefore(option, pick.options[1] || null);
    }
    Object.assign(option.dataset, {
      url: answer.url, url2x: answer.url_2x, width: answer.width, height: answer.height, alt: answer.alt,
    });
    pick.value = String(answer.id);
    alt.value = answer.alt;
    upload.reset();
    status.textContent = answer.created
      ? `Uploaded “${answer.filename}”: chosen above, ready to insert.`
      : `That file is already in the library as “${answer.filename}”: chosen above.`;
  });
}
document.querySelectorAll("[data-media-panel]").forEach(mediaPanel);
