// IntentusNet explorer: the little that needs a script. Pages work without it.
"use strict";
document.addEventListener("click", (event) => {
  const button = event.target.closest("button.copy");
  if (!button) return;
  const text = button.dataset.copy;
  const done = () => { button.textContent = "Copied"; setTimeout(() => { button.textContent = "Copy"; }, 1500); };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, () => select(button));
  } else {
    select(button);
  }
});
function select(button) {
  // Without clipboard access (plain http off loopback): select the text to copy by hand.
  const code = button.parentElement.querySelector("code");
  const range = document.createRange();
  range.selectNodeContents(code);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
}
document.addEventListener("change", (event) => {
  // The diff button is usable once exactly two records are ticked.
  if (!event.target.matches("table.records input[name=id]")) return;
  const ticked = document.querySelectorAll("table.records input[name=id]:checked").length;
  const compare = document.getElementById("compare");
  if (compare) compare.disabled = ticked !== 2;
});
window.addEventListener("DOMContentLoaded", () => {
  const compare = document.getElementById("compare");
  if (compare) compare.disabled = true;
});
document.addEventListener("submit", (event) => {
  // Leave empty filters out of the address, so it stays short and shareable.
  if (!event.target.matches("form.filters")) return;
  for (const field of event.target.elements) {
    if (field.name && !field.value) field.disabled = true;
  }
});
window.addEventListener("pageshow", () => {
  for (const field of document.querySelectorAll("form.filters [disabled]")) field.disabled = false;
});

// The execution page's detail panel: each bar's detail is a <template> in the
// page; its name (a button), its bar, or the address (#step-3, ?span=step-3)
// opens it; Esc or the close button closes it and gives focus back.
let opener = null;
function openSpan(span, focus) {
  const template = document.getElementById("detail-" + span);
  const panel = document.getElementById("panel");
  if (!template || !panel) return;
  panel.querySelector(".panel-body").replaceChildren(template.content.cloneNode(true));
  panel.hidden = false;
  panel.parentElement.classList.add("panel-open");
  panel.dataset.span = span;
  for (const lane of document.querySelectorAll(".lane.selected")) lane.classList.remove("selected");
  const lane = document.getElementById("lane-" + span);
  if (lane) lane.classList.add("selected");
  const address = new URL(location.href);
  address.searchParams.delete("span");
  address.hash = span;
  history.replaceState(null, "", address);
  if (focus) panel.querySelector(".panel-title").focus();
}
function closePanel() {
  const panel = document.getElementById("panel");
  if (!panel || panel.hidden) return;
  const span = panel.dataset.span;
  panel.hidden = true;
  panel.parentElement.classList.remove("panel-open");
  delete panel.dataset.span;
  for (const lane of document.querySelectorAll(".lane.selected")) lane.classList.remove("selected");
  const address = new URL(location.href);
  address.hash = "";
  history.replaceState(null, "", address);
  // the name that opened it, or the same lane's name if the timeline was redrawn
  const back = opener && opener.isConnected
    ? opener : document.querySelector(`button.span-open[data-span="${CSS.escape(span)}"]`);
  if (back) back.focus();
  opener = null;
}
document.addEventListener("click", (event) => {
  if (event.target.closest(".panel-close")) { closePanel(); return; }
  const lane = event.target.closest(".timeline .lane");
  const button = lane && lane.querySelector("button.span-open");
  if (!button || event.target.closest("a")) return;
  opener = button;
  openSpan(button.dataset.span, true);
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape") closePanel();
});
window.addEventListener("DOMContentLoaded", () => {
  const asked = new URLSearchParams(location.search).get("span") || location.hash.slice(1);
  if (asked && document.getElementById("detail-" + asked)) {
    opener = document.querySelector(`#lane-${CSS.escape(asked)} button.span-open`);
    openSpan(asked, true);
  }
  follow(document.querySelector("[data-live]"));
});

// A running execution's timeline is redrawn in place, once a second, from
// /ui/executions/ID/live (the same template the page drew it with).
function follow(section) {
  if (!section) return;
  const note = document.getElementById("live-note");
  note.hidden = false;
  note.textContent = "Running: the timeline follows it, once a second.";
  const tick = async () => {
    let answer;
    try {
      const response = await fetch(section.dataset.live, { headers: { accept: "application/json" } });
      answer = await response.json();
      if (!response.ok) throw new Error(answer.message || response.status);
    } catch (error) {
      note.textContent = "Live updates stopped: " + error.message;
      return;
    }
    const timeline = document.getElementById("timeline");
    const focused = timeline.contains(document.activeElement) ? document.activeElement.dataset.span : null;
    timeline.innerHTML = answer.timeline;
    if (focused) {
      // the redrawn lane's name takes the focus back, so a keyboard user keeps their place
      const again = timeline.querySelector(`button.span-open[data-span="${CSS.escape(focused)}"]`);
      if (again) again.focus();
    }
    const panel = document.getElementById("panel");
    if (panel && panel.dataset.span) openSpan(panel.dataset.span, false);
    const badge = document.getElementById("record-status");
    if (badge) {
      badge.textContent = answer.status;
      badge.className = "status status-" + answer.status;
    }
    if (answer.running) {
      setTimeout(tick, 1000);
    } else {
      // Ended: everything else on the page (badges, replayability, errors, the
      // response) was drawn while it ran, so the page is drawn again, whole.
      note.textContent = `The execution ended (${answer.status}): showing its whole record.`;
      sessionStorage.setItem(ENDED, answer.status);
      location.reload();
    }
  };
  setTimeout(tick, 1000);
}
// Said once after the reload an ended execution asked for.
const ENDED = "intentusnet-ended:" + location.pathname;
window.addEventListener("DOMContentLoaded", () => {
  const ended = sessionStorage.getItem(ENDED);
  const note = document.getElementById("live-note");
  if (ended === null || !note) return;
  sessionStorage.removeItem(ENDED);
  note.hidden = false;
  note.textContent = `The execution ended (${ended}) while you watched; the page shows its whole record.`;
});
