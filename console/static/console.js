// The operator console's script: confirmation dialogs for actions, which
// are the operator API's calls (under /console/api, with the session
// cookie and the page's CSRF token); live refresh of the lists; expiry
// countdowns; reading a statement file into the matching form.
"use strict";
(function () {
  var csrf = document.querySelector('meta[name="csrf"]').content;
  var texts = {};
  document.querySelectorAll("#i18n").forEach(function (t) {
    t.content.querySelectorAll("data").forEach(function (d) { texts[d.value] = d.textContent; });
  });
  function t(k) { return texts[k] || k; }
  function group(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }

  var flash = document.getElementById("flash");
  // say shows msg; detail, the API's own (English) words, follows it
  // isolated.
  function say(msg, bad, detail) {
    flash.textContent = msg;
    if (detail) {
      flash.appendChild(document.createTextNode(": "));
      var b = document.createElement("bdi");
      b.dir = "ltr";
      b.textContent = detail;
      flash.appendChild(b);
    }
    flash.className = bad ? "error" : "ok";
  }

  // fail states an API error answer: in English the API's message as it
  // is, in another language the code's text and the field's label first
  // (as console.T.Failure does), the message as the detail.
  function fail(res) {
    var what = texts["err." + res.code];
    if (document.body.dataset.lang === "en" || !what) {
      say(res.message || t("error"), true);
      return;
    }
    say(what + (res.field ? " (" + t(res.field) + ")" : ""), true, res.message);
  }

  function api(path, body) {
    return fetch("/console/api/" + path, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify(body || {})
    }).then(function (r) {
      return r.json().catch(function () { return { status: r.status, message: r.statusText }; });
    });
  }

  // Who moved a transaction last, for the operator who came second.
  function whoWon(id) {
    return fetch("/console/tx/" + encodeURIComponent(id) + "?fragment=who", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : ""; });
  }

  // Each action: the dialog's title, its fields, and the call it makes;
  // tx marks the actions that move a transaction, where a 409
  // invalid_transition means another operator moved it first.
  var actions = {
    approve: { title: "confirmApprove", tx: true, fields: [["amount", "amountReceived", "number", true]],
      call: function (id, v) { return api("deposits/" + id + "/approve", { amount: +v.amount }); } },
    reject: { title: "confirmReject", tx: true, fields: [["reason", "reason", "text", true]],
      call: function (id, v, b) { return api((b.dataset.kind === "deposit" ? "deposits/" : "withdrawals/") + id + "/reject", { reason: v.reason }); } },
    take: { title: "confirmTake", tx: true, fields: [],
      call: function (id) { return api("withdrawals/" + id + "/process"); } },
    pay: { title: "confirmPay", tx: true, fields: [["reference", "reference", "text", false]],
      call: function (id, v) { return api("withdrawals/" + id + "/pay", v.reference ? { reference: v.reference } : {}); } },
    resend: { title: "resend", fields: [],
      call: function (id) { return api("callbacks/" + id + "/resend"); } },
    adjust: { title: "adjust", fields: [["amount", "adjustAmount", "number", true], ["reason", "reason", "text", true]],
      call: function (id, v) { return api("sites/" + id + "/adjustments", { amount: +v.amount, reason: v.reason }); } }
  };

  // showIds writes ids into el, each isolated: a processId is the
  // merchant's text and may hold right-to-left overrides.
  function showIds(el, ids) {
    el.textContent = "";
    ids.filter(Boolean).forEach(function (v, i) {
      if (i) el.appendChild(document.createTextNode(" · "));
      var b = document.createElement("bdi");
      b.textContent = v;
      el.appendChild(b);
    });
  }

  // isRace: the answer is another operator's move of the transaction
  // first. Every other 409 (an adjustment below the negative limit, a
  // resend for a site without callbackUrl) is said as the API says it.
  function isRace(a, res) {
    return a.tx && res.status === 409 && res.code === "invalid_transition";
  }

  var dialog = document.getElementById("dialog");
  var open = null;
  function ask(button) {
    var a = actions[button.dataset.action];
    var id = button.dataset.id;
    document.getElementById("dialog-title").textContent = t(a.title);
    var row = button.closest("tr");
    showIds(document.getElementById("dialog-text"), [id, row && row.dataset.processId]);
    var box = document.getElementById("dialog-fields");
    box.textContent = "";
    a.fields.forEach(function (f) {
      var label = document.createElement("label");
      label.textContent = t(f[1]) + " ";
      var input = document.createElement("input");
      input.name = f[0]; input.id = "dialog-" + f[0]; input.type = f[2]; input.required = f[3];
      if (f[2] === "number") { input.step = "1"; input.inputMode = "numeric"; }
      if (f[0] === "amount" && button.dataset.amount) input.value = button.dataset.amount;
      label.appendChild(input);
      box.appendChild(label);
    });
    open = { a: a, id: id, button: button };
    dialog.showModal();
    var first = box.querySelector("input") || document.getElementById("dialog-ok");
    first.focus();
  }
  document.getElementById("dialog-cancel").addEventListener("click", function () { dialog.close("cancel"); });
  dialog.addEventListener("close", function () {
    var o = open;
    open = null;
    if (!o || dialog.returnValue !== "ok") return;
    var v = {};
    dialog.querySelectorAll("#dialog-fields input").forEach(function (i) { v[i.name] = i.value.trim(); });
    o.a.call(o.id, v, o.button).then(function (res) {
      if (res.status === 200) {
        var d = res.data || {};
        say(t("done") + ": " + o.id + (d.status ? " · " + t("status." + d.status) : "") + (d.amount ? " · " + group(d.amount) + " " + t("iqd") : ""));
      } else if (isRace(o.a, res)) {
        whoWon(o.id).then(function (who) { say(t("conflict") + ": " + (who || res.message), true); });
      } else {
        fail(res);
      }
      refresh();
    }, function () { say(t("error"), true); });
  });
  document.addEventListener("click", function (e) {
    var b = e.target.closest("button[data-action]");
    if (b) ask(b);
  });

  // Lists refresh themselves for every operator watching, unless a
  // dialog is open.
  function refresh() {
    document.querySelectorAll("[data-live]").forEach(function (el) {
      if (!el.dataset.live || dialog.open) return;
      fetch(el.dataset.live, { credentials: "same-origin" }).then(function (r) {
        if (r.status === 401) { location.reload(); return null; }
        return r.ok ? r.text() : null;
      }).then(function (html) {
        if (html !== null && !dialog.open) { el.innerHTML = html; tick(); }
      }, function () {});
    });
  }
  setInterval(refresh, 2000);

  function tick() {
    document.querySelectorAll("[data-expires]").forEach(function (el) {
      var s = Math.max(0, Math.floor((+el.dataset.expires - Date.now()) / 1000));
      el.textContent = s > 0 ? Math.floor(s / 60) + ":" + String(s % 60).padStart(2, "0") : t("expired");
    });
  }
  setInterval(tick, 1000);
  tick();

  document.querySelectorAll("input[type=file][data-into]").forEach(function (input) {
    input.addEventListener("change", function () {
      var f = input.files[0];
      if (!f) return;
      var rd = new FileReader();
      rd.onload = function () { document.getElementById(input.dataset.into).value = rd.result; };
      rd.readAsText(f);
    });
  });
})();
