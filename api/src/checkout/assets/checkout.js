// The checkout page: renders the invoice state embedded in the page, then polls
// /checkout/{id}/state and re-renders without reloading. Every text comes from the messages
// block (the catalogue of the page's language, `<html lang>`), so a translation is one more
// catalogue on the server. Fiat amounts are formatted with the browser's Intl.NumberFormat in
// that language; crypto amounts are shown exactly as the server sends them.
(function () {
  "use strict";
  var root = document.getElementById("checkout");
  var lang = document.documentElement.lang || "en";
  var query = "?lang=" + encodeURIComponent(lang);
  var invoice = root.getAttribute("data-invoice");
  var M = JSON.parse(document.getElementById("checkout-messages").textContent);
  var state = JSON.parse(document.getElementById("checkout-state").textContent);
  var skew = 0; // server time - local time, in ms
  var redirectAt = null;
  var qrFor = null;
  var FINAL = { paid: 1, overpaid: 1, invalid: 1, cancelled: 1 };

  function $(id) { return document.getElementById(id); }
  function t(key, vars) {
    var s = M[key] || key;
    Object.keys(vars || {}).forEach(function (k) { s = s.split("{" + k + "}").join(vars[k]); });
    return s;
  }
  function show(id, on) { $(id).hidden = !on; }
  // "€49.90" in English, "49,90 €" in German: the currency's minor units, the payer's locale.
  // The amount is passed as its decimal string, so no digit is lost to floating point.
  function money(amount, currency) {
    try {
      return new Intl.NumberFormat(lang, { style: "currency", currency: currency }).format(amount);
    } catch (e) {
      return amount + " " + currency;
    }
  }
  function networkText(g) {
    return g.token_standard ? g.network_name + " (" + g.token_standard + ")" : g.network_name;
  }
  function text(id, s) { $(id).textContent = s == null ? "" : s; }

  function staticTexts() {
    document.title = t("title");
    text("amount-label", t("send_exactly"));
    text("network-label", t("network"));
    text("address-label", t("address"));
    text("tag-label", t("tag"));
    [["copy-amount", "copy_amount"], ["copy-address", "copy_address"], ["copy-tag", "copy_tag"]].forEach(function (p) {
      text(p[0], t("copy"));
      $(p[0]).setAttribute("aria-label", t(p[1]));
    });
    text("simulate-title", t("simulate_title"));
    text("simulate-full", t("simulate_full"));
    text("simulate-partial", t("simulate_partial"));
    text("simulate-excess", t("simulate_excess"));
    text("redirect-link", t("redirect_link"));
    text("receipt-link", t("receipt_link"));
    text("methods-title", t("status_draft"));
  }

  function statusText(s) {
    var asset = s.gate ? s.gate.asset : "";
    var seen = s.payments.filter(function (p) { return p.status === "confirming"; });
    switch (s.status) {
      case "draft": return t("status_draft");
      case "pending":
      case "confirming":
        if (seen.length) return t("status_seen", { n: seen[0].confirmations, m: seen[0].required_confirmations });
        return t("status_pending");
      case "underpaid":
        return t("status_underpaid", { remaining: s.amount_remaining || "", asset: asset });
      case "expired": return s.can_activate ? t("choose_again") : t("status_expired");
      default: return t("status_" + s.status);
    }
  }

  function render(s) {
    state = s;
    if (!s) {
      text("status", t("not_found"));
      return;
    }
    skew = Date.parse(s.now) - Date.now();
    show("test-banner", s.test_mode);
    text("test-banner", t("test_banner"));
    text("merchant", t("pay_to", { merchant: s.merchant_name }));
    text("description", s.description);
    show("description", !!s.description);
    // The price and what it is for, at the top of every state.
    show("fiat-total", !!s.amount_fiat);
    text("fiat-total", s.amount_fiat ? money(s.amount_fiat, s.fiat_currency) : "");
    var st = $("status");
    st.setAttribute("data-status", s.status);
    text("status", statusText(s));
    // A draft's one heading is the method list's.
    show("status", s.status !== "draft");

    // Choosing a method (drafts, or an expired deferred invoice that may be activated again).
    show("methods", s.can_activate);
    if (s.can_activate) {
      var list = $("method-list");
      list.textContent = "";
      s.options.forEach(function (o) {
        var li = document.createElement("li");
        var b = document.createElement("button");
        b.type = "button";
        b.setAttribute("data-gate", o.gate.id);
        var label = document.createElement("span");
        label.className = "method-label";
        label.textContent = o.gate.label;
        var amount = document.createElement("span");
        amount.className = "method-amount";
        amount.textContent = o.amount + " " + o.gate.asset;
        b.appendChild(label);
        b.appendChild(amount);
        b.addEventListener("click", function () { post("/activate", { gate_id: o.gate.id }); });
        li.appendChild(b);
        list.appendChild(li);
      });
    }

    // Paying: while the invoice takes payments.
    var paying = !!s.address && (s.status === "pending" || s.status === "confirming" || s.status === "underpaid");
    show("pay", paying);
    if (paying) {
      var due = s.amount_remaining || s.amount;
      text("amount-label", s.amount_remaining ? t("send_remaining") : t("send_exactly"));
      text("amount", due);
      text("asset", s.gate.asset);
      text("fiat", s.amount_fiat && !s.amount_remaining ? t("amount_fiat", { fiat: money(s.amount_fiat, s.fiat_currency) }) : "");
      text("network", networkText(s.gate));
      text("address", s.address);
      show("tag-row", !!s.address_tag);
      text("tag", s.address_tag);
      var img = $("qr");
      var key = s.payment_uri;
      if (qrFor !== key) {
        qrFor = key;
        img.src = "/checkout/" + invoice + "/qr.svg?v=" + encodeURIComponent(due);
      }
      img.alt = t("qr_alt", { amount: due, asset: s.gate.asset, address: s.address });
    }

    // Done.
    var done = !!FINAL[s.status] && (s.status === "paid" || s.status === "overpaid");
    show("done", done);
    if (done) {
      text("received", t("paid_amount", { amount: s.amount_paid, asset: s.gate ? s.gate.asset : "" }));
      $("receipt-link").href = "/checkout/" + invoice + "/receipt" + query;
      var link = $("redirect-link");
      if (s.redirect_url) {
        link.href = s.redirect_url;
        link.hidden = false;
        if (redirectAt === null) redirectAt = Date.now() + 5000;
      }
    }

    show("simulate", s.test_mode && paying);
    tick();
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  function tick() {
    var s = state;
    if (!s) return;
    var now = Date.now() + skew;
    if (s.expires_at && !$("pay").hidden) {
      var left = Math.max(0, Math.floor((Date.parse(s.expires_at) - now) / 1000));
      var h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), sec = left % 60;
      text("countdown", left > 0 ? t("expires_in", { time: (h ? h + ":" + pad(m) : m) + ":" + pad(sec) }) : t("expired_at"));
    }
    if (redirectAt !== null && s.redirect_url) {
      var secs = Math.max(0, Math.ceil((redirectAt - Date.now()) / 1000));
      text("redirect-note", t("redirect_in", { seconds: secs }));
      if (secs === 0) {
        redirectAt = Infinity;
        window.location.assign(s.redirect_url);
      }
    }
  }

  function fail(message) {
    var e = $("error");
    e.hidden = !message;
    e.textContent = message ? t("error", { message: message }) : "";
  }

  function post(path, body) {
    fail(null);
    return fetch("/checkout/" + invoice + path + query, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().then(function (j) {
        if (!r.ok) throw new Error((j.error && j.error.message) || r.status);
        render(j.data);
        return j.data;
      });
    }).catch(function (e) { fail(e.message); });
  }

  function poll() {
    fetch("/checkout/" + invoice + "/state" + query, { cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(new Error(r.status)); })
      .then(function (j) { fail(null); render(j.data); })
      .catch(function () { fail(t("connection_lost")); })
      .then(function () {
        var over = !state || FINAL[state.status] || (state.status === "expired" && !state.can_activate);
        if (!over) setTimeout(poll, 2000);
      });
  }

  function copy(what) {
    var value = what === "amount" ? $("amount").textContent : $(what).textContent;
    var button = $("copy-" + what);
    // While it says "copied", that is also its accessible name (a name must contain the
    // visible text); both return after 1.5 s.
    var done = function () {
      var label = button.getAttribute("aria-label");
      button.textContent = t("copied");
      button.setAttribute("aria-label", t("copied"));
      setTimeout(function () {
        button.textContent = t("copy");
        button.setAttribute("aria-label", label);
      }, 1500);
    };
    var fallback = function () {
      var area = document.createElement("textarea");
      area.value = value;
      area.setAttribute("readonly", "");
      area.style.position = "absolute";
      area.style.left = "-9999px";
      document.body.appendChild(area);
      area.select();
      try { document.execCommand("copy"); done(); } catch (e) { /* nothing to do */ }
      document.body.removeChild(area);
      button.focus();
    };
    // The clipboard API where the browser grants it, else (or when it refuses) a selection.
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(value).then(done, fallback);
    } else {
      fallback();
    }
  }

  staticTexts();
  Array.prototype.forEach.call(document.querySelectorAll("[data-copy]"), function (b) {
    b.addEventListener("click", function () { copy(b.getAttribute("data-copy")); });
  });
  Array.prototype.forEach.call(document.querySelectorAll("[data-simulate]"), function (b) {
    b.addEventListener("click", function () {
      post("/test-payment", { kind: b.getAttribute("data-simulate") }).then(function (d) {
        if (d) text("simulate-note", t("simulate_sent"));
      });
    });
  });
  render(state);
  if (state) {
    setInterval(tick, 1000);
    setTimeout(poll, 2000);
  }
})();
