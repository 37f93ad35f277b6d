/* openpert results: sortable tables and the controls toggle.
 *
 * Everything here is an enhancement: the pages carry their full content in HTML, so with scripts
 * off the tables read as rendered (ranked), with controls shown.
 */
(function () {
  "use strict";

  // Cells carry their raw value in data-sort; the shown text is only a fallback.
  function sortKey(cell) {
    if (!cell) return "";
    var key = cell.getAttribute("data-sort");
    return key === null ? cell.textContent.trim() : key;
  }

  function compare(a, b, numeric) {
    // Missing values sort last whichever the direction, so they never crowd the top.
    if (a === "" && b === "") return 0;
    if (a === "") return 1;
    if (b === "") return -1;
    if (numeric) {
      var x = parseFloat(a), y = parseFloat(b);
      if (!isNaN(x) && !isNaN(y)) return x - y;
    }
    return a.localeCompare(b, undefined, { numeric: true, sensitivity: "base" });
  }

  function sortTable(table, header) {
    var col = parseInt(header.getAttribute("data-col"), 10);
    var numeric = header.getAttribute("data-type") === "number";
    var current = header.getAttribute("aria-sort");
    var direction;
    if (current === "ascending") direction = "descending";
    else if (current === "descending") direction = "ascending";
    else direction = header.getAttribute("data-first") === "desc" ? "descending" : "ascending";
    var sign = direction === "ascending" ? 1 : -1;

    // Sort inside each band (tbody) so controls never mix with methods.
    Array.prototype.forEach.call(table.tBodies, function (body) {
      var rows = Array.prototype.filter.call(body.rows, function (row) {
        return !row.classList.contains("band");
      });
      var keyed = rows.map(function (row, index) {
        return { row: row, key: sortKey(row.cells[col]), index: index };
      });
      keyed.sort(function (p, q) {
        if (p.key === "" || q.key === "") {
          return compare(p.key, q.key, numeric) || p.index - q.index;
        }
        return sign * compare(p.key, q.key, numeric) || p.index - q.index;
      });
      keyed.forEach(function (item) {
        body.appendChild(item.row);
      });
    });

    table.querySelectorAll("th[data-col]").forEach(function (th) {
      if (th === header) th.setAttribute("aria-sort", direction);
      else th.removeAttribute("aria-sort");
    });
  }

  function makeSortable(table) {
    table.querySelectorAll("thead th[data-col]").forEach(function (th) {
      // A button makes the header reachable and operable from the keyboard.
      var button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      while (th.firstChild) button.appendChild(th.firstChild);
      var icon = document.createElement("span");
      icon.className = "sort-icon";
      icon.setAttribute("aria-hidden", "true");
      button.appendChild(icon);
      th.appendChild(button);
      button.addEventListener("click", function () {
        sortTable(table, th);
      });
    });
    table.classList.add("js-sortable");
  }

  function setUpToggle(input) {
    var table = document.getElementById(input.getAttribute("data-controls-for"));
    if (!table) return;
    var label = input.closest("label");
    if (label) label.hidden = false;
    function apply() {
      table.querySelectorAll("tbody[data-band='controls']").forEach(function (body) {
        body.hidden = !input.checked;
      });
    }
    input.addEventListener("change", apply);
    apply();
  }

  // The tab strip fades out at its right edge while there is more to scroll to.
  function setUpStrip(nav) {
    var list = nav.querySelector("ul");
    if (!list) return;
    function update() {
      var room = list.scrollWidth - list.clientWidth;
      nav.classList.toggle("fits", room <= 1);
      nav.classList.toggle("at-end", room > 1 && list.scrollLeft >= room - 1);
    }
    list.addEventListener("scroll", update, { passive: true });
    window.addEventListener("resize", update);
    update();
  }

  function init() {
    document.querySelectorAll("nav.toc").forEach(setUpStrip);
    document.querySelectorAll("table.sortable").forEach(makeSortable);
    document.querySelectorAll("input[data-controls-for]").forEach(setUpToggle);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
