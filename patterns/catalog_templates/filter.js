// Filters and search over the rows' data-* attributes; state lives in the URL query
// (index.html?category=numerics&q=softmax) so results can be linked.
(function () {
  "use strict";
  var KEYS = ["category", "bottleneck", "project", "safety"];
  var q = document.getElementById("q");
  var selects = {};
  KEYS.forEach(function (k) { selects[k] = document.getElementById("f-" + k); });
  var rows = Array.prototype.slice.call(document.querySelectorAll("#patterns tbody tr"));
  var count = document.getElementById("count");
  var empty = document.getElementById("empty");
  var clear = document.getElementById("clear");
  var permalink = document.getElementById("permalink");

  function setSelect(sel, value) {
    if (value && !Array.prototype.some.call(sel.options, function (o) { return o.value === value; })) {
      var o = document.createElement("option");  // unknown value from a link: keep it, it matches nothing
      o.value = value;
      o.textContent = value + " (0)";
      sel.appendChild(o);
    }
    sel.value = value || "";
  }

  function readQuery() {
    var params = new URLSearchParams(window.location.search);
    KEYS.forEach(function (k) { setSelect(selects[k], params.get(k)); });
    q.value = params.get("q") || "";
  }

  function query() {
    var params = new URLSearchParams();
    KEYS.forEach(function (k) { if (selects[k].value) params.set(k, selects[k].value); });
    if (q.value.trim()) params.set("q", q.value.trim());
    var s = params.toString();
    return s ? "?" + s : "";
  }

  function apply() {
    var words = q.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    rows.forEach(function (row) {
      var ok = KEYS.every(function (k) {
        var want = selects[k].value;
        return !want || (row.getAttribute("data-" + k) || "").split(" ").indexOf(want) >= 0;
      }) && words.every(function (w) { return row.getAttribute("data-search").indexOf(w) >= 0; });
      row.hidden = !ok;
      if (ok) shown += 1;
    });
    count.textContent = shown + " of " + rows.length + " patterns";
    empty.hidden = shown > 0;
    var qs = query();
    clear.hidden = !qs;
    permalink.setAttribute("href", "index.html" + qs);
    if (window.location.search !== qs) {
      try {
        window.history.replaceState(null, "", window.location.pathname + qs + window.location.hash);
      } catch (e) { /* some browsers refuse history changes on file:// */ }
    }
  }

  KEYS.forEach(function (k) { selects[k].addEventListener("change", apply); });
  q.addEventListener("input", apply);
  clear.addEventListener("click", function () {
    KEYS.forEach(function (k) { selects[k].value = ""; });
    q.value = "";
    apply();
    q.focus();
  });
  document.addEventListener("keydown", function (e) {
    if (e.key === "/" && document.activeElement !== q && !/^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName)) {
      e.preventDefault();
      q.focus();
    }
  });
  window.addEventListener("popstate", function () { readQuery(); apply(); });
  readQuery();
  apply();
})();
