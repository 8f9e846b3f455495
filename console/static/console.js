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

  // Amounts are typed and shown grouped (25,000) and sent as the plain
  // integer. Arabic-Indic digits, which an Arabic or Kurdish keyboard
  // types, are read as theirs.
  function latinDigits(s) {
    return s.replace(/[\u0660-\u0669]/g, function (d) { return d.charCodeAt(0) - 0x660; })
      .replace(/[\u06F0-\u06F9]/g, function (d) { return d.charCodeAt(0) - 0x6F0; });
  }
  // amountOf is the integer an amount field holds; NaN when it holds
  // anything else (the API then says what it needs).
  function amountOf(v) {
    var s = latinDigits(v).replace(/[\s,\u066C]/g, "").replace("\u2212", "-");
    return /^-?\d+$/.test(s) ? +s : NaN;
  }
  // groupAmounts keeps input's amount grouped as it is typed, the caret
  // after the same digit; signed lets it start with a minus.
  function groupAmounts(input, signed) {
    function format() {
      var v = latinDigits(input.value);
      var caret = input.selectionStart === null ? v.length : input.selectionStart;
      var before = v.slice(0, caret).replace(/\D/g, "").length;
      var neg = signed && /^\s*[-\u2212]/.test(v);
      var digits = v.replace(/\D/g, "").replace(/^0+(?=\d)/, "");
      var out = (neg ? "-" : "") + group(digits);
      if (out === input.value) return;
      input.value = out;
      var pos = neg ? 1 : 0;
      for (var n = 0; pos < out.length && n < before; pos++) {
        if (out[pos] !== ",") n++;
      }
      if (document.activeElement === input) input.setSelectionRange(pos, pos);
    }
    input.addEventListener("input", format);
    format();
  }
  document.querySelectorAll("input[data-group=amount]").forEach(function (i) { groupAmounts(i, false); });

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

  // fail states an API error answer as console.T.Failure states a page's:
  // the field named by the label the operator sees (the dialog's own, else
  // the console's for that parameter), never by the API's parameter; in
  // English the API's message, in another language the code's text and the
  // label first, the message as the detail.
  function fail(res, a) {
    var label = res.field || "";
    (a ? a.fields : []).concat([[res.field, "field." + res.field]]).some(function (f) {
      if (f[0] !== res.field || !texts[f[1]]) return false;
      label = texts[f[1]];
      return true;
    });
    var msg = res.message || t("error");
    var named = false;
    if (res.field && msg.slice(0, res.field.length) === res.field && !/\w/.test(msg.charAt(res.field.length))) {
      msg = "\u201C" + label + "\u201D" + msg.slice(res.field.length);
      named = true;
    }
    var what = texts["err." + res.code];
    if (document.body.dataset.lang === "en" || !what) {
      say(res.field && !named ? label + ": " + msg : msg, true);
      return;
    }
    say(what + (res.field ? " (" + label + ")" : ""), true, msg);
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

  // Each action: the dialog's title, its fields (name, label, kind:
  // amount, signed amount or text; required), and the call it makes; tx
  // marks the actions that move a transaction, where a 409
  // invalid_transition means another operator moved it first; danger
  // those whose confirmation is red.
  var actions = {
    approve: { title: "confirmApprove", tx: true, fields: [["amount", "amountReceived", "amount", true]],
      call: function (id, v) { return api("deposits/" + id + "/approve", { amount: amountOf(v.amount) }); } },
    reject: { title: "confirmReject", tx: true, danger: true, fields: [["reason", "reason", "text", true]],
      call: function (id, v, b) { return api((b.dataset.kind === "deposit" ? "deposits/" : "withdrawals/") + id + "/reject", { reason: v.reason }); } },
    take: { title: "confirmTake", tx: true, fields: [],
      call: function (id) { return api("withdrawals/" + id + "/process"); } },
    pay: { title: "confirmPay", tx: true, fields: [["reference", "reference", "text", false]],
      call: function (id, v) { return api("withdrawals/" + id + "/pay", v.reference ? { reference: v.reference } : {}); } },
    resend: { title: "resend", fields: [],
      call: function (id) { return api("callbacks/" + id + "/resend"); } },
    adjust: { title: "adjust", fields: [["amount", "adjustAmount", "signed", true], ["reason", "reason", "text", true]],
      call: function (id, v) { return api("sites/" + id + "/adjustments", { amount: amountOf(v.amount), reason: v.reason }); } }
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
      input.name = f[0]; input.id = "dialog-" + f[0]; input.type = "text"; input.required = f[3];
      input.autocomplete = "off";
      if (f[0] === "amount" && button.dataset.amount) input.value = button.dataset.amount;
      label.appendChild(input);
      box.appendChild(label);
      if (f[2] === "amount") input.inputMode = "numeric";
      if (f[2] === "amount" || f[2] === "signed") groupAmounts(input, f[2] === "signed");
    });
    document.getElementById("dialog-ok").className = "primary" + (a.danger ? " danger" : "");
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
        fail(res, o.a);
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
