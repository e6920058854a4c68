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
