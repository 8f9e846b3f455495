// Command merchant is the merchant API from a terminal, built on the Go
// client (github.com/iqdgateway/gateway/client): create deposits and withdrawals, look them up,
// read the treasury and the methods, and compute a signature while
// debugging an integration.
//
//	merchant [-url URL] [-app-key KEY] [-secret SECRET] <command> [flags]
//
// The URL, appKey and secret come from the flags or from GATEWAY_URL,
// GATEWAY_APP_KEY and GATEWAY_SECRET.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"

	"github.com/iqdgateway/gateway/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

const usage = `usage: merchant [-url URL] [-app-key KEY] [-secret SECRET] <command> [flags]

commands:
  deposit    create a deposit (-bank -process-id -amount -user-id -user-name -name [-sender-name] [-lang])
  withdraw   create a withdrawal (-bank -process-id -amount -user-id -user-name -name -account-name -iban)
  status     a transaction: status <transactionId>, or status -process-id ID
  balance    the site's treasury
  banks      the enabled methods ([-type deposit|withdraw] [-lang en|ar|ku])
  sign       the sign header of a body or query: sign 'amount=25000&…' (or - for standard input)
  sandbox    move a sandbox site's own transaction: sandbox approve|reject|expire|process|pay|reject-withdrawal
             <transactionId> [-amount N] [-reason TEXT] [-reference TEXT]; or ask for a test callback:
             sandbox callback -type deposit.approved <transactionId>
  listen     forward the site's callbacks to a local URL: listen -forward-to http://localhost:3000/callbacks
             ([-after WEBHOOK_ID] to start after an event instead of from now on)

The URL, appKey and secret are read from GATEWAY_URL, GATEWAY_APP_KEY and GATEWAY_SECRET
when the flags are not given. Records are printed as JSON; a refusal prints its code,
message, field and requestId on standard error and exits with 1; a call whose outcome is
unknown (no answer, or not the gateway's) exits with 3: run the same command again.
`

// run is the command; it returns the exit code: 0, 1 for a failed call,
// 2 for a usage error, 3 for a call whose outcome is unknown.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("merchant", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	base := fs.String("url", getenv("GATEWAY_URL"), "the gateway's base URL [GATEWAY_URL]")
	appKey := fs.String("app-key", getenv("GATEWAY_APP_KEY"), "the site's appKey [GATEWAY_APP_KEY]")
	secret := fs.String("secret", getenv("GATEWAY_SECRET"), "the site's secret [GATEWAY_SECRET]")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	if cmd == "sign" {
		return sign(rest, *secret, stdin, stdout, stderr)
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"-url (GATEWAY_URL)", *base}, {"-app-key (GATEWAY_APP_KEY)", *appKey}, {"-secret (GATEWAY_SECRET)", *secret}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(stderr, "merchant: %s missing\n", strings.Join(missing, ", "))
		return 2
	}
	c := client.New(*base, *appKey, *secret)
	var out any
	var err error
	switch cmd {
	case "deposit":
		var r client.DepositRequest
		sub := newSub("deposit", stderr)
		sub.common(&r.BankID, &r.ProcessID, &r.Amount, &r.UserID, &r.UserName, &r.Name)
		sub.StringVar(&r.SenderName, "sender-name", "", "the name on the paying wallet, if different")
		sub.StringVar(&r.Lang, "lang", "", "en, ar or ku")
		if code := sub.parse(rest, commonFlags...); code != 0 {
			return code
		}
		out, err = c.CreateDeposit(ctx, r)
	case "withdraw":
		var r client.WithdrawalRequest
		sub := newSub("withdraw", stderr)
		sub.common(&r.BankID, &r.ProcessID, &r.Amount, &r.UserID, &r.UserName, &r.Name)
		sub.StringVar(&r.AccountName, "account-name", "", "the recipient name at the wallet")
		sub.StringVar(&r.IBAN, "iban", "", "the recipient's wallet, card or account number")
		if code := sub.parse(rest, append(commonFlags, "account-name", "iban")...); code != 0 {
			return code
		}
		out, err = c.CreateWithdrawal(ctx, r)
	case "status":
		sub := newSub("status", stderr)
		pid := sub.String("process-id", "", "look the transaction up by your processId")
		if code := sub.parse(rest); code != 0 {
			return code
		}
		switch {
		case *pid != "" && sub.NArg() == 0:
			out, err = c.TransactionByProcessID(ctx, *pid)
		case *pid == "" && sub.NArg() == 1:
			out, err = c.Transaction(ctx, sub.Arg(0))
		default:
			fmt.Fprintln(stderr, "merchant status: give a transactionId, or -process-id")
			return 2
		}
	case "listen":
		sub := newSub("listen", stderr)
		to := sub.String("forward-to", "", "the local URL to POST each callback to")
		after := sub.String("after", "", "start after this webhook-id instead of from now on")
		if code := sub.parse(rest, "forward-to"); code != 0 {
			return code
		}
		return listen(ctx, c, *to, *after, stdout, stderr)
	case "sandbox":
		if len(rest) == 0 {
			fmt.Fprintln(stderr, "merchant sandbox: give an action: approve, reject, expire, process, pay or reject-withdrawal")
			return 2
		}
		action, ok := sandboxActions[rest[0]]
		if !ok && rest[0] != "callback" {
			fmt.Fprintf(stderr, "merchant sandbox: unknown action %q\n", rest[0])
			return 2
		}
		sub := newSub("sandbox "+rest[0], stderr)
		typ := sub.String("type", "", "callback: the callback type to send")
		amount := sub.String("amount", "", "approve: the amount received")
		reason := sub.String("reason", "", "reject: the reason")
		ref := sub.String("reference", "", "pay: the payment's reference")
		if code := sub.parse(rest[1:]); code != 0 {
			return code
		}
		if sub.NArg() != 1 {
			fmt.Fprintln(stderr, "merchant sandbox: give the transactionId")
			return 2
		}
		if rest[0] == "callback" {
			out, err = c.SandboxCallback(ctx, sub.Arg(0), *typ)
			break
		}
		form := url.Values{}
		for k, v := range map[string]string{"amount": *amount, "reason": *reason, "reference": *ref} {
			if v != "" {
				form.Set(k, v)
			}
		}
		out, err = c.Sandbox(ctx, action, sub.Arg(0), form)
	case "balance":
		if code := newSub("balance", stderr).parse(rest); code != 0 {
			return code
		}
		out, err = c.Balance(ctx)
	case "banks":
		sub := newSub("banks", stderr)
		kind := sub.String("type", "", "deposit or withdraw")
		lang := sub.String("lang", "", "en, ar or ku")
		if code := sub.parse(rest); code != 0 {
			return code
		}
		out, err = c.Banks(ctx, *kind, *lang)
	default:
		fmt.Fprintf(stderr, "merchant: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if err != nil {
		return failed(stderr, err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(stderr, "merchant:", err)
		return 1
	}
	return 0
}

// sandboxActions are the sandbox command's actions.
var sandboxActions = map[string]string{
	"approve": client.SandboxApprove, "reject": client.SandboxRejectDeposit, "expire": client.SandboxExpire,
	"process": client.SandboxProcess, "pay": client.SandboxPay, "reject-withdrawal": client.SandboxRejectWithdrawal,
}

// failed prints a call's failure: a refusal with its code, message, field
// and requestId (1), or an unknown outcome, with what to do (3).
func failed(stderr io.Writer, err error) int {
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Fprintf(stderr, "error: %d %s: %s\n", e.Status, e.Code, e.Message)
		unknown := e.Code == "outcome_unknown" // docs/errors.md: maybe recorded
		if e.Field != "" {
			fmt.Fprintf(stderr, "  field:     %s\n", e.Field)
		}
		if e.DocURL != "" {
			fmt.Fprintf(stderr, "  see:       %s\n", e.DocURL)
		}
		if e.RequestID != "" {
			fmt.Fprintf(stderr, "  requestId: %s\n", e.RequestID)
		}
		if unknown {
			return outcomeUnknown(stderr)
		}
		return 1
	}
	fmt.Fprintln(stderr, "error:", err)
	var ne *client.NetworkError
	if errors.As(err, &ne) {
		return outcomeUnknown(stderr)
	}
	return 1
}

// outcomeUnknown says what to do about a call the gateway may have
// recorded: the same command with the same -process-id answers it, and
// never creates a second.
func outcomeUnknown(stderr io.Writer) int {
	fmt.Fprintln(stderr, "  the outcome is unknown: the gateway may have recorded it; run the same command again (the same -process-id) to learn it")
	return 3
}

// sign prints the sign header of its argument (or of standard input for
// "-"), exactly as given: no newline is added or removed.
func sign(args []string, secret string, stdin io.Reader, stdout, stderr io.Writer) int {
	if secret == "" {
		fmt.Fprintln(stderr, "merchant sign: -secret (GATEWAY_SECRET) missing")
		return 2
	}
	if len(args) != 1 {
		fmt.Fprintln(stderr, "merchant sign: give the body of a POST or the query of a GET (the bytes after ?), or - to read them")
		return 2
	}
	data := []byte(args[0])
	if args[0] == "-" {
		var err error
		if data, err = io.ReadAll(stdin); err != nil {
			fmt.Fprintln(stderr, "merchant sign:", err)
			return 1
		}
	}
	fmt.Fprintln(stdout, client.Sign(secret, data))
	return 0
}

// sub is a command's flags.
type sub struct {
	*flag.FlagSet
	stderr io.Writer
}

func newSub(name string, stderr io.Writer) *sub {
	fs := flag.NewFlagSet("merchant "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &sub{fs, stderr}
}

// commonFlags are the flags of both creations, all required.
var commonFlags = []string{"bank", "process-id", "amount", "user-id", "user-name", "name"}

// common defines commonFlags into the request's fields.
func (s *sub) common(bank, pid *string, amount *int64, user, userName, name *string) {
	s.StringVar(bank, "bank", "", "the method's code or _id")
	s.StringVar(pid, "process-id", "", "your unique id of the transaction")
	s.Int64Var(amount, "amount", 0, "whole IQD")
	s.StringVar(user, "user-id", "", "the end user's id")
	s.StringVar(userName, "user-name", "", "the end user's username")
	s.StringVar(name, "name", "", "the end user's full name")
}

// parse parses args and requires the flags named.
func (s *sub) parse(args []string, required ...string) int {
	if err := s.Parse(args); err != nil {
		return 2
	}
	set := map[string]bool{}
	s.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var missing []string
	for _, r := range required {
		if !set[r] {
			missing = append(missing, "-"+r)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(s.stderr, "%s: %s missing\n", s.Name(), strings.Join(missing, ", "))
		return 2
	}
	return 0
}
