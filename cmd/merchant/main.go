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
	"cmp"
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

const usage = `usage: merchant [-url URL] [-app-key KEY] [-secret SECRET] [-previous-secret SECRET] <command> [flags]

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

The URL, appKey and secrets are read from GATEWAY_URL, GATEWAY_APP_KEY, GATEWAY_SECRET and
GATEWAY_PREVIOUS_SECRET when the flags are not given; the previous secret (during a rotation's
overlap) is only used to check records' hashes. Records are printed as JSON. Exit codes:
  0  done
  1  refused: the code, message, field, documentation and requestId are printed on standard error
  2  usage error
  3  no answer, or an answer that is not the gateway's: what to do is printed (a creation: run
     it again with the same -process-id, which never creates a second transaction)
  4  the gateway answered with the record, printed, but its hash does not match the secret(s)
     given: check -secret (and -previous-secret during a rotation); the call itself was done
`

// run is the command; it returns the exit code of usage: 0, 1 for a
// refused call, 2 for a usage error, 3 for no answer (a creation's outcome
// unknown), 4 for an answer whose hash does not verify.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("merchant", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	base := fs.String("url", getenv("GATEWAY_URL"), "the gateway's base URL [GATEWAY_URL]")
	appKey := fs.String("app-key", getenv("GATEWAY_APP_KEY"), "the site's appKey [GATEWAY_APP_KEY]")
	secret := fs.String("secret", getenv("GATEWAY_SECRET"), "the site's secret [GATEWAY_SECRET]")
	previous := fs.String("previous-secret", getenv("GATEWAY_PREVIOUS_SECRET"), "the site's secret before a rotation, while its overlap lasts: records hashed with it are accepted too [GATEWAY_PREVIOUS_SECRET]")
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
	c := client.New(*base, *appKey, *secret, client.WithPreviousSecret(*previous))
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
	badHash := errors.Is(err, client.ErrBadHash)
	if err != nil && !badHash {
		return failed(stderr, err, noAnswer(cmd, rest))
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(stderr, "merchant:", err)
		return 1
	}
	if badHash {
		// The gateway did what was asked and answered with the record: a
		// refusal's code would say it did not.
		fmt.Fprintf(stderr, "warning: %v\n  the gateway answered with the record above, but its hash is not made with -secret (or -previous-secret):\n"+
			"  check the secret; during a rotation's overlap give the new one and the previous one (docs/merchant-api.md#response-hash)\n", err)
		return 4
	}
	return 0
}

// sandboxActions are the sandbox command's actions.
var sandboxActions = map[string]client.SandboxAction{
	"approve": client.SandboxApprove, "reject": client.SandboxRejectDeposit, "expire": client.SandboxExpire,
	"process": client.SandboxProcess, "pay": client.SandboxPay, "reject-withdrawal": client.SandboxRejectWithdrawal,
}

// failed prints a call's failure: a refusal with its code, message,
// field, documentation and requestId (1), or no answer, with what to do
// about it (3).
func failed(stderr io.Writer, err error, advice string) int {
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Fprintf(stderr, "error: %d %s: %s\n", e.Status, e.Code, e.Message)
		unknown := e.Code == "outcome_unknown" // docs/errors.md: maybe recorded
		if e.Field != "" {
			fmt.Fprintf(stderr, "  field:     %s\n", e.Field)
		}
		if see := cmp.Or(e.DocLink, e.DocURL); see != "" {
			fmt.Fprintf(stderr, "  see:       %s\n", see)
		}
		if e.RequestID != "" {
			fmt.Fprintf(stderr, "  requestId: %s\n", e.RequestID)
		}
		if unknown {
			fmt.Fprintln(stderr, " ", advice)
			return 3
		}
		return 1
	}
	fmt.Fprintln(stderr, "error:", err)
	var ne *client.NetworkError
	if errors.As(err, &ne) {
		fmt.Fprintln(stderr, " ", advice)
		return 3
	}
	return 1
}

// noAnswer says what to do about a call the gateway did not answer (or
// answered with something not its own): a creation may have been recorded,
// and the same command with the same -process-id answers it without ever
// creating a second; a sandbox action may have been done; a read changed
// nothing.
func noAnswer(cmd string, rest []string) string {
	switch {
	case cmd == "deposit" || cmd == "withdraw":
		return "the outcome is unknown: the gateway may have recorded it; run the same command again (the same -process-id) to learn it"
	case cmd == "sandbox" && len(rest) > 0 && rest[0] == "callback":
		return "the outcome is unknown: the test callback may have been sent; asking again sends another"
	case cmd == "sandbox":
		return "the outcome is unknown: the gateway may have moved the transaction; merchant status <transactionId> tells (the same action again is refused once it is done)"
	}
	return "the gateway did not answer; this command changes nothing: run it again"
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
