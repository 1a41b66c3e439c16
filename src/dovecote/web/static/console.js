// dovecote's console: every change goes through the JSON API after a confirmation, with the
// page's CSRF token; the answer (or the refusal) is shown in #result.
"use strict";
(() => {
  const RESULT_KEY = "dovecote.result";
  const SVG = "http://www.w3.org/2000/svg";
  const resultBox = document.getElementById("result");
  const dialog = document.getElementById("confirm");

  function showResult(text, ok) {
    resultBox.textContent = text;
    resultBox.className = ok ? "ok" : "error";
    resultBox.hidden = false;
  }

  function keepResult(text) {
    sessionStorage.setItem(RESULT_KEY, text);
  }

  const kept = sessionStorage.getItem(RESULT_KEY);
  if (kept !== null) {
    sessionStorage.removeItem(RESULT_KEY);
    showResult(kept, true);
  }

  async function call(method, url, body, contentType) {
    const token = document.querySelector('meta[name="csrf-token"]').content;
    const headers = { "X-CSRF-Token": token };
    if (body !== undefined) headers["Content-Type"] = contentType || "application/json";
    const response = await fetch(url, { method, headers, body, credentials: "same-origin" });
    let answer = {};
    try {
      answer = await response.json();
    } catch (_) {
      answer = {};
    }
    if (!response.ok) throw new Error(answer.error || `${response.status} ${response.statusText}`);
    return answer;
  }

  function describe(answer) {
    return Object.entries(answer)
      .map(([key, value]) => `${key}: ${typeof value === "object" ? JSON.stringify(value) : value}`)
      .join(", ");
  }

  function confirmed(text) {
    return new Promise((resolve) => {
      document.getElementById("confirm-text").textContent = text;
      dialog.returnValue = "";
      dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
      dialog.showModal();
      document.getElementById("confirm-cancel").focus();
    });
  }

  async function act(text, method, url, body, then) {
    if (!(await confirmed(text))) return;
    try {
      const answer = await call(method, url, body);
      keepResult(`Done. ${describe(answer)}`);
      if (then) window.location.assign(then);
      else window.location.reload();
    } catch (error) {
      showResult(`Refused: ${error.message}`, false);
    }
  }

  for (const button of document.querySelectorAll("button[data-method]")) {
    button.addEventListener("click", () =>
      act(button.dataset.confirm, button.dataset.method, button.dataset.url,
          button.dataset.body, button.dataset.then));
  }

  for (const button of document.querySelectorAll("button[data-chosen]")) {
    button.addEventListener("click", () => {
      const form = button.form;
      const chosen = [...form.querySelectorAll('input[name="message"]:checked')].map((i) => i.value);
      const verb = button.dataset.chosen;
      if (chosen.length === 0) {
        showResult(`Choose the messages to ${verb} first.`, false);
        return;
      }
      const body = { messages: chosen };
      let text = `${verb[0].toUpperCase()}${verb.slice(1)} ${chosen.length} message(s)`;
      if (verb === "move" || verb === "copy") {
        body.to = form.elements.to.value.trim();
        body.to_type = "queue";
        if (!body.to) {
          showResult(`Name the queue to ${verb} to.`, false);
          form.elements.to.focus();
          return;
        }
        text += ` to queue ${body.to}`;
      } else if (verb === "retry") {
        text += " back to their original destinations";
      }
      act(`${text}?`, "POST", button.dataset.url, JSON.stringify(body));
    });
  }

  const chooseAll = document.getElementById("choose-all");
  if (chooseAll) {
    chooseAll.addEventListener("change", () => {
      for (const box of document.querySelectorAll('input[name="message"]')) box.checked = chooseAll.checked;
    });
  }

  const sendForm = document.getElementById("send");
  if (sendForm) {
    sendForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      const f = sendForm.elements;
      const name = f.name.value.trim();
      const params = new URLSearchParams({ persistent: f.persistent.checked ? "true" : "false" });
      for (const field of ["priority", "delay", "timeToLive", "correlationId", "type", "replyTo", "properties"]) {
        const value = f[field].value.trim();
        if (value !== "") params.set(field, value);
      }
      const kind = f.kind.value;
      if (!(await confirmed(`Send this message to ${kind.slice(0, -1)} ${name}?`))) return;
      const url = `/api/${kind}/${encodeURIComponent(name)}/messages?${params}`;
      try {
        const answer = await call("POST", url, f.body.value, "text/plain; charset=utf-8");
        showResult(`Sent ${answer.message_id || "a scheduled message"} to ${kind.slice(0, -1)} ${name}.`, true);
      } catch (error) {
        showResult(`Refused: ${error.message}`, false);
      }
    });
  }

  // Tables: sort by a column (its header button), filter by text.
  for (const button of document.querySelectorAll("table.sortable th button")) {
    button.addEventListener("click", () => {
      const th = button.closest("th");
      const table = th.closest("table");
      const column = [...th.parentNode.children].indexOf(th);
      const ascending = th.getAttribute("aria-sort") !== "ascending";
      for (const other of th.parentNode.children) other.removeAttribute("aria-sort");
      th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      const numeric = button.dataset.sort === "number";
      const body = table.tBodies[0];
      const rows = [...body.rows].filter((r) => !r.classList.contains("empty"));
      const key = (row) => row.cells[column].textContent.trim();
      rows.sort((a, b) => {
        const order = numeric ? Number(key(a)) - Number(key(b)) : key(a).localeCompare(key(b));
        return ascending ? order : -order;
      });
      for (const row of rows) body.appendChild(row);
    });
  }

  for (const input of document.querySelectorAll("input.filter")) {
    input.addEventListener("input", () => {
      const wanted = input.value.trim().toLowerCase();
      const table = document.getElementById(input.dataset.table);
      for (const row of table.tBodies[0].rows) {
        if (row.classList.contains("empty")) continue;
        row.hidden = wanted !== "" && !row.cells[0].textContent.toLowerCase().includes(wanted);
      }
    });
  }

  for (const cell of document.querySelectorAll(".time[data-ms]")) {
    const ms = Number(cell.dataset.ms);
    cell.textContent = ms > 0 ? new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC") : "";
  }

  for (const radio of document.querySelectorAll('input[name="view"]')) {
    radio.addEventListener("change", () => {
      for (const view of document.querySelectorAll(".body-view")) view.hidden = view.dataset.view !== radio.value;
    });
  }

  // Counters follow the broker, every 5 s: a destination's, or each row of a list's (a
  // destination made since the page loaded shows at the next load).
  for (const table of document.querySelectorAll("table[data-refresh]")) {
    const refreshCounters = async () => {
      let answer;
      try {
        answer = await call("GET", table.dataset.refresh);
      } catch (_) {
        return; // a deleted destination: its page stays as it was
      }
      const rows = Array.isArray(answer) ? answer : [answer];
      for (const row of rows) {
        const scope = Array.isArray(answer)
          ? [...table.tBodies[0].rows].find((r) => r.dataset.name === row.name)
          : table;
        if (!scope) continue;
        for (const cell of scope.querySelectorAll("[data-field]")) cell.textContent = row[cell.dataset.field];
      }
    };
    setInterval(refreshCounters, 5000);
  }

  // The dashboard: totals and the rate chart, every 5 s.
  const chart = document.getElementById("rates");
  if (chart) {
    const line = (points, cls) => {
      const el = document.createElementNS(SVG, "polyline");
      el.setAttribute("points", points);
      el.setAttribute("class", cls);
      chart.appendChild(el);
    };
    const draw = (samples) => {
      chart.replaceChildren();
      // The last ten minutes, or the last whole minutes there are samples of.
      const oldest = Math.max(0, ...samples.map((s) => s.ago));
      const width = 600, height = 150, span = Math.min(600, Math.max(60, Math.ceil(oldest / 60) * 60));
      const peak = Math.max(1, ...samples.map((s) => Math.max(s.enqueued, s.dequeued)));
      const axis = document.createElementNS(SVG, "line");
      for (const [k, v] of Object.entries({ x1: 0, y1: height, x2: width, y2: height, class: "axis" })) axis.setAttribute(k, v);
      chart.appendChild(axis);
      const at = (s, field) => `${(width * (1 - s.ago / span)).toFixed(1)},${(height - (height - 10) * s[field] / peak).toFixed(1)}`;
      line(samples.map((s) => at(s, "enqueued")).join(" "), "enq");
      line(samples.map((s) => at(s, "dequeued")).join(" "), "deq");
      document.getElementById("rates-peak").textContent = `peak ${peak.toFixed(1)}/s, last ${span / 60} minute${span > 60 ? "s" : ""}`;
    };
    const refresh = async () => {
      try {
        const [totals, rates] = await Promise.all([call("GET", "/api/broker"), call("GET", "/api/rates")]);
        for (const cell of document.querySelectorAll("[data-field]")) cell.textContent = totals[cell.dataset.field];
        draw(rates.samples);
      } catch (error) {
        showResult(`Cannot refresh: ${error.message}`, false);
      }
    };
    refresh();
    setInterval(refresh, 5000);
  }
})();
