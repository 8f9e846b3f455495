{{/* The page's script, inline in page.html under the nonce of its
   Content-Security-Policy: copy buttons, the countdown and the status poll. */ -}}
(function(){
var main=document.querySelector("main"),state=document.getElementById("state");
// Copy buttons work on plain HTTP too, where the Clipboard API is missing.
function copy(text){
 if(navigator.clipboard&&window.isSecureContext){return navigator.clipboard.writeText(text);}
 return new Promise(function(ok,fail){var ta=document.createElement("textarea");ta.value=text;ta.setAttribute("readonly","");
  ta.style.position="fixed";ta.style.opacity="0";document.body.appendChild(ta);ta.select();
  var done=false;try{done=document.execCommand("copy");}catch(e){}document.body.removeChild(ta);done?ok():fail();});
}
document.querySelectorAll("[data-copy]").forEach(function(b){b.addEventListener("click",function(){
 var el=document.getElementById(b.dataset.copy);var t=el.dataset.value||el.textContent;var label=b.textContent;
 copy(t).then(function(){b.textContent={{.T.copied}};setTimeout(function(){b.textContent=label},1500)},function(){});});});
// Numbers in the page's digits, as the server writes the amount.
function digits(s){return main.dataset.digits==="arab"?s.replace(/[0-9]/g,function(d){return "٠١٢٣٤٥٦٧٨٩"[d];}):s;}
var el=document.getElementById("timer");
if(el){var end=+el.dataset.expires;(function tick(){var s=Math.max(0,Math.floor((end-Date.now())/1000));
 el.textContent=s>0?digits(Math.floor(s/60)+":"+String(s%60).padStart(2,"0")):{{.T.expired}};if(s>0)setTimeout(tick,1000);})();}
// The status changes without a reload: approved, rejected or expired.
function show(st,text){
 main.dataset.status=st;state.textContent=text||state.dataset[st]||state.textContent;
 state.className="state"+(st==="approved"?" ok":st==="pending"?"":" bad");
 if(st!=="pending"){document.querySelectorAll(".pending-only").forEach(function(n){n.remove();});}
}
(function poll(){
 if(main.dataset.status!=="pending")return;
 setTimeout(function(){fetch(main.dataset.statusUrl,{cache:"no-store"}).then(function(r){return r.ok?r.json():null;})
  .then(function(j){if(j&&j.data&&j.data.status&&j.data.status!==main.dataset.status){
   // An approval may be for the amount received: show what was credited,
   // and why it is not what was asked for.
   var a=document.getElementById("amount"),text="";
   if(j.data.amountText){a.textContent=j.data.amountText;a.dataset.value=String(j.data.amount);}
   if(j.data.status==="approved"&&j.data.amountText&&String(j.data.amount)!==a.dataset.requested){
    text=state.dataset.approvedFor.replace("{amount}",j.data.amountText).replace("{requested}",a.dataset.requestedText);}
   show(j.data.status,text);}poll();},poll);},3000);
})();
})();
