// Package client is the Go client of the gateway's merchant API
// (docs/merchant-api.md): it signs every call with the site's secret,
// sends typed requests, returns typed records, checks each record's
// response hash, turns the gateway's refusals into *Error values and calls
// whose outcome is not known (no answer, or an answer that is not the
// gateway's) into *NetworkError values, and repeats a creation safely
// (with the same processId) when the network or the gateway fails. It
// also verifies and decodes the gateway's callbacks (webhook.go), and
// follows them without a public URL (Callbacks).
//
//	c := client.New("https://pay.example", appKey, secret)
//	d, err := c.CreateDeposit(ctx, client.DepositRequest{BankID: "ZAINCASH", ProcessID: "order-1001",
//		Amount: 25000, UserID: "u-42", UserName: "ali_k", Name: "Ali Kareem"})
package client

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls one site's merchant API. It is safe for concurrent use.
type Client struct {
	base   string
	appKey string
	secret string
	// previous is the secret before a rotation, accepted in hashes.
	previous string
	hc       *http.Client
	// attempts bounds the tries of one creation; backoff is the first
	// pause between them, doubled each time.
	attempts int
	backoff  time.Duration
	// wait pauses Callbacks between connections.
	wait func(ctx context.Context, d time.Duration) error
}

// Option changes a Client.
type Option func(*Client)

// WithHTTPClient sends the calls through hc (http.DefaultClient otherwise).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetries sets how many times a creation is tried in all (4 by
// default) and the first pause between tries (250 ms, doubled each time;
// a Retry-After answer's own wait is taken when longer), which is also the
// first pause of Callbacks before it reconnects.
func WithRetries(attempts int, backoff time.Duration) Option {
	return func(c *Client) { c.attempts, c.backoff = max(attempts, 1), backoff }
}

// WithPreviousSecret has the client accept a record's hash made with the
// site's previous signing secret as well as with its secret, for the
// overlap of a rotation: a client that has taken the new secret is then
// still shown, in callbacks, hashes made with the old one until the
// overlap ends (docs/merchant-api.md "Response hash"). Calls are signed
// with the secret given to New only.
func WithPreviousSecret(secret string) Option { return func(c *Client) { c.previous = secret } }

// New returns a client of the gateway at baseURL for the site with appKey
// and secret.
func New(baseURL, appKey, secret string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), appKey: appKey, secret: secret, hc: http.DefaultClient,
		attempts: 4, backoff: 250 * time.Millisecond, wait: sleep}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Sign returns the sign header for the bytes signed: the exact body of a
// POST, or the exact query of a GET (the bytes after ?).
func Sign(secret string, signed []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(signed)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// DepositRequest is a deposit to create (seed 4.1).
type DepositRequest struct {
	BankID, ProcessID      string
	Amount                 int64
	UserID, UserName, Name string
	SenderName, Lang       string // optional
}

// WithdrawalRequest is a withdrawal to create (seed 4.2).
type WithdrawalRequest struct {
	BankID, ProcessID      string
	Amount                 int64
	UserID, UserName, Name string
	AccountName, IBAN      string
}

func (r DepositRequest) form() url.Values {
	f := url.Values{"bankId": {r.BankID}, "processId": {r.ProcessID}, "amount": {strconv.FormatInt(r.Amount, 10)},
		"userId": {r.UserID}, "userName": {r.UserName}, "name": {r.Name}}
	if r.SenderName != "" {
		f.Set("senderName", r.SenderName)
	}
	if r.Lang != "" {
		f.Set("lang", r.Lang)
	}
	return f
}

func (r WithdrawalRequest) form() url.Values {
	return url.Values{"bankId": {r.BankID}, "processId": {r.ProcessID}, "amount": {strconv.FormatInt(r.Amount, 10)},
		"userId": {r.UserID}, "userName": {r.UserName}, "name": {r.Name}, "accountName": {r.AccountName}, "iban": {r.IBAN}}
}

// CreateDeposit creates a deposit, or returns the one already created with
// its processId, or the end user's pending one (AlreadyPending). On a
// network error, an answer that is not the gateway's (a proxy's error page,
// an answer cut short), a 503 or an unknown outcome it tries again with the
// same processId, which the gateway never records twice.
func (c *Client) CreateDeposit(ctx context.Context, r DepositRequest) (*Transaction, error) {
	return c.create(ctx, "/v1/transactions/deposit", r.form())
}

// CreateWithdrawal creates a withdrawal (reserving it from the treasury),
// or returns the one already created with its processId; it retries as
// CreateDeposit does.
func (c *Client) CreateWithdrawal(ctx context.Context, r WithdrawalRequest) (*Transaction, error) {
	return c.create(ctx, "/v1/transactions/withdraw", r.form())
}

func (c *Client) create(ctx context.Context, path string, form url.Values) (*Transaction, error) {
	body := form.Encode()
	pause := c.backoff
	for attempt := 1; ; attempt++ {
		var tx Transaction
		err := c.call(ctx, http.MethodPost, path, body, &tx)
		if err == nil {
			return &tx, c.checkHash(&tx)
		}
		wait, again := retryable(err)
		if !again || attempt >= c.attempts {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-time.After(max(pause, wait)):
		}
		pause *= 2
	}
}

// retryable reports whether a creation may be sent again: it failed on
// the way (the network, or an answer that is not the gateway's), or the
// gateway recorded nothing (503, 429) or does not know whether it did
// (504); wait is the answer's Retry-After.
func retryable(err error) (time.Duration, bool) {
	var e *Error
	if !errors.As(err, &e) {
		var ne *NetworkError
		return 0, errors.As(err, &ne)
	}
	switch e.Status {
	case http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return e.RetryAfter, true
	}
	return 0, false
}

// Transaction returns a transaction by its id.
func (c *Client) Transaction(ctx context.Context, id string) (*Transaction, error) {
	var tx Transaction
	if err := c.call(ctx, http.MethodGet, "/v1/transactions/"+url.PathEscape(id), "", &tx); err != nil {
		return nil, err
	}
	return &tx, c.checkHash(&tx)
}

// TransactionByProcessID returns a transaction by the merchant's processId.
func (c *Client) TransactionByProcessID(ctx context.Context, processID string) (*Transaction, error) {
	var tx Transaction
	q := url.Values{"processId": {processID}}.Encode()
	if err := c.call(ctx, http.MethodGet, "/v1/transactions?"+q, "", &tx); err != nil {
		return nil, err
	}
	return &tx, c.checkHash(&tx)
}

// Balance returns the site's treasury.
func (c *Client) Balance(ctx context.Context) (*Balance, error) {
	var b Balance
	if err := c.call(ctx, http.MethodGet, "/v1/balance", "", &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// Banks returns the enabled methods: for deposits or withdrawals when kind
// is "deposit" or "withdraw" (all when ""), named in lang (en, ar, ku).
func (c *Client) Banks(ctx context.Context, kind, lang string) ([]Method, error) {
	q := url.Values{}
	if kind != "" {
		q.Set("type", kind)
	}
	if lang != "" {
		q.Set("lang", lang)
	}
	path := "/v1/banks"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out []Method
	if err := c.call(ctx, http.MethodGet, path, "", &out); err != nil {
		return nil, err
	}
	return out, nil
}

// SandboxAction is what an operator does to a live site's transactions,
// and a sandbox site's merchant does to its own (docs/merchant-api.md
// "Sandbox sites"): one of the Sandbox constants. It is not a string, so
// that an action the gateway does not know does not compile.
type SandboxAction uint8

// Sandbox actions.
const (
	SandboxApprove          SandboxAction = iota + 1 // a deposit; form: amount (optional, what was received)
	SandboxRejectDeposit                             // form: reason (optional)
	SandboxExpire                                    // expires the deposit now
	SandboxProcess                                   // a withdrawal, taken
	SandboxPay                                       // form: reference (optional)
	SandboxRejectWithdrawal                          // form: reason (optional)
)

// sandboxPaths are the actions' places under /v1/sandbox: the kind of
// transaction, and the verb after its id.
var sandboxPaths = [...]struct{ kind, verb string }{
	SandboxApprove: {"deposits", "approve"}, SandboxRejectDeposit: {"deposits", "reject"}, SandboxExpire: {"deposits", "expire"},
	SandboxProcess: {"withdrawals", "process"}, SandboxPay: {"withdrawals", "pay"}, SandboxRejectWithdrawal: {"withdrawals", "reject"},
}

// String names the action as its path does: "deposits/approve".
func (a SandboxAction) String() string {
	if int(a) >= len(sandboxPaths) || a == 0 {
		return "SandboxAction(" + strconv.Itoa(int(a)) + ")"
	}
	p := sandboxPaths[a]
	return p.kind + "/" + p.verb
}

// Sandbox moves a sandbox site's own transaction: action is one of the
// Sandbox constants, form its optional fields.
func (c *Client) Sandbox(ctx context.Context, action SandboxAction, txID string, form url.Values) (*Transaction, error) {
	if int(action) >= len(sandboxPaths) || action == 0 {
		return nil, fmt.Errorf("sandbox action %v: use one of the client.Sandbox constants", action)
	}
	p := sandboxPaths[action]
	var tx Transaction
	if err := c.call(ctx, http.MethodPost, "/v1/sandbox/"+p.kind+"/"+url.PathEscape(txID)+"/"+p.verb, form.Encode(), &tx); err != nil {
		return nil, err
	}
	return &tx, c.checkHash(&tx)
}

// SandboxCallback asks a sandbox site's gateway for a test callback of typ
// (deposit.approved, …) about one of its transactions: it is delivered
// like the real ones, with "test": true, and changes nothing.
func (c *Client) SandboxCallback(ctx context.Context, txID, typ string) (*Transaction, error) {
	var tx Transaction
	form := url.Values{"type": {typ}}.Encode()
	if err := c.call(ctx, http.MethodPost, "/v1/sandbox/transactions/"+url.PathEscape(txID)+"/callbacks", form, &tx); err != nil {
		return nil, err
	}
	return &tx, c.checkHash(&tx)
}

// ErrBadHash is returned, with the record, when a record's hash is not the
// HMAC of its transactionId, bankId and amount under the site's secret:
// the answer did not come from the gateway holding that secret, or was
// changed on the way.
var ErrBadHash = errors.New("the record's hash does not match")

func (c *Client) checkHash(tx *Transaction) error {
	if !c.hashValid(tx) {
		return fmt.Errorf("transaction %s: %w", tx.TransactionID, ErrBadHash)
	}
	return nil
}

// hashValid reports whether tx's hash was made with the client's secret
// or its previous one (WithPreviousSecret).
func (c *Client) hashValid(tx *Transaction) bool {
	return VerifyHash(c.secret, tx.TransactionID, tx.BankID, tx.Amount, tx.Hash) ||
		c.previous != "" && VerifyHash(c.previous, tx.TransactionID, tx.BankID, tx.Amount, tx.Hash)
}

// VerifyHash checks a record's response hash: base64(HMAC-SHA256(secret,
// transactionId + bankId + amount)) (docs/merchant-api.md "Response hash").
func VerifyHash(secret, txID, bankID string, amount int64, hash string) bool {
	want := Sign(secret, []byte(txID+bankID+strconv.FormatInt(amount, 10)))
	return hmac.Equal([]byte(want), []byte(hash))
}

// call sends one signed request and decodes the answer's data into out.
func (c *Client) call(ctx context.Context, method, pathQuery, body string, out any) error {
	var rd io.Reader
	signed := body
	if method == http.MethodGet {
		_, signed, _ = strings.Cut(pathQuery, "?")
	} else {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+pathQuery, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, pathQuery, err)
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("appKey", c.appKey)
	req.Header.Set("sign", Sign(c.secret, []byte(signed)))
	res, err := c.hc.Do(req)
	if err != nil {
		return &NetworkError{Op: method + " " + pathQuery, Err: err}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if err != nil {
		return &NetworkError{Op: method + " " + pathQuery, Status: res.StatusCode, Err: err}
	}
	return decodeAnswer(method+" "+pathQuery, res, raw, out)
}

// decodeAnswer decodes a 200 answer's data into out, and turns a refusal
// into an *Error. Only the gateway's envelope is either: anything else (a
// proxy's error page, an answer cut short, data that does not decode) says
// nothing of what the gateway did, so it is a *NetworkError like a lost
// answer, and a creation is repeated.
func decodeAnswer(op string, res *http.Response, raw []byte, out any) error {
	unreadable := func(why error) error {
		return &NetworkError{Op: op, Status: res.StatusCode, Err: fmt.Errorf("%w: %w", ErrUnreadableAnswer, why)}
	}
	var env struct {
		Data      json.RawMessage `json:"data"`
		Code      string          `json:"code"`
		Message   string          `json:"message"`
		Field     string          `json:"field"`
		DocURL    string          `json:"docUrl"`
		DocLink   string          `json:"docLink"`
		RequestID string          `json:"requestId"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return unreadable(err)
	}
	if res.StatusCode != http.StatusOK {
		if env.Code == "" {
			return unreadable(errors.New("an error without a code"))
		}
		e := &Error{Status: res.StatusCode, Code: env.Code, Message: env.Message, Field: env.Field, DocURL: env.DocURL,
			DocLink: env.DocLink, RequestID: env.RequestID}
		if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 {
			e.RetryAfter = time.Duration(s) * time.Second
		}
		return e
	}
	if len(env.Data) == 0 || string(env.Data) == "null" {
		return unreadable(errors.New("no data"))
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return unreadable(fmt.Errorf("decode the data: %w", err))
	}
	return nil
}

// Error is the gateway's refusal: the HTTP status, the error code
// (docs/errors.md), the message, the field to blame, where the code is
// explained (DocURL in the repository, DocLink as a link to open) and the
// request's id.
// Only an answer in the gateway's envelope is an *Error; any other (a
// proxy's error page, say) is a *NetworkError.
type Error struct {
	Status    int
	Code      string
	Message   string
	Field     string
	DocURL    string
	DocLink   string
	RequestID string
	// RetryAfter is the answer's Retry-After (429, 503).
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	s := fmt.Sprintf("gateway: %d %s: %s", e.Status, e.Code, e.Message)
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	if e.RequestID != "" {
		s += " [requestId " + e.RequestID + "]"
	}
	return s
}

// Is matches an *Error by its code: errors.Is(err, &client.Error{Code:
// "unknown_bank"}).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code != "" && t.Code == e.Code
}

// Code returns the error code of err when it is the gateway's refusal,
// and "" otherwise.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// NetworkError is a call whose outcome is not known: it got no answer, or
// an answer that is not the gateway's (Err wraps ErrUnreadableAnswer then).
// Whether the gateway carried it out is not known: a creation is safe to
// repeat with the same processId, which CreateDeposit and CreateWithdrawal
// do before they return one; look the transaction up by its processId, or
// repeat the creation later.
type NetworkError struct {
	Op string
	// Status is the HTTP status of an answer that is not the gateway's (0
	// when no answer came).
	Status int
	Err    error
}

// ErrUnreadableAnswer is wrapped by the *NetworkError of a call answered
// with something other than the gateway's envelope: a proxy's error page,
// an answer cut short, data that does not decode.
var ErrUnreadableAnswer = errors.New("the answer is not the gateway's")

func (e *NetworkError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("gateway: %s: HTTP %d: %v", e.Op, e.Status, e.Err)
	}
	return "gateway: " + e.Op + ": " + e.Err.Error()
}
func (e *NetworkError) Unwrap() error { return e.Err }
