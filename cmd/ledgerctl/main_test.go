package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/aggregates"
	"github.com/iqdgateway/gateway/audit"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/ids"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// ledgerctl runs the command in process and returns its exit status and
// output.
func ledgerctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRun_usageErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
	}{
		{"no command", nil},
		{"unknown command", []string{"frobnicate"}},
		{"audit without a source", []string{"audit"}},
		{"audit with both sources", []string{"audit", "--data", dir, "--nats", "nats://127.0.0.1:4222"}},
		{"gateway without token", []string{"audit", "--data", dir, "--gateway", "http://127.0.0.1:1"}},
		{"token without gateway", []string{"audit", "--data", dir, "--token", "t"}},
		{"unknown flag", []string{"audit", "--data", dir, "--colour"}},
		{"stray argument", []string{"audit", "--data", dir, "extra"}},
		{"negative workers", []string{"audit", "--data", dir, "--workers", "-1"}},
		{"events without site", []string{"events", "--data", dir}},
		{"events without source", []string{"events", "--site", "s1"}},
		{"events negative limit", []string{"events", "--site", "s1", "--data", dir, "--limit", "-2"}},
		{"events bad from", []string{"events", "--site", "s1", "--data", dir, "--from", "x"}},
		{"events wildcard site", []string{"events", "--site", "*", "--data", dir}},
		{"events dotted site", []string{"events", "--site", "s1.>", "--data", dir}},
		{"audit parent site", []string{"audit", "--site", "..", "--data", dir}},
		{"audit control character in site", []string{"audit", "--site", "s1\n", "--data", dir}},
		{"generate without data", []string{"generate"}},
		{"generate no events", []string{"generate", "--data", dir, "--events", "0"}},
		{"generate bad snapshot fraction", []string{"generate", "--data", dir, "--snapshot-at", "2"}},
		{"generate snapshot fraction NaN", []string{"generate", "--data", dir, "--snapshot-at", "NaN"}},
		{"generate more sites than events", []string{"generate", "--data", dir, "--events", "100", "--sites", "100000000"}},
		{"generate too many events", []string{"generate", "--data", dir, "--events", "1000000000"}},
		{"generate too large a batch", []string{"generate", "--data", dir, "--batch", "300000"}},
		{"audit too many workers", []string{"audit", "--data", dir, "--workers", "100000000"}},
		{"cluster without nats", []string{"cluster"}},
		{"cluster with data", []string{"cluster", "--data", dir}},
		{"cluster stray argument", []string{"cluster", "--nats", "nats://127.0.0.1:4222", "extra"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := ledgerctl(t, tc.args...)
			assert.Equal(t, exitUsage, code, "stdout %q stderr %q", out, errOut)
			assert.NotEmpty(t, errOut)
		})
	}
	code, out, _ := ledgerctl(t, "help")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "ledgerctl audit")
	code, _, _ = ledgerctl(t, "audit", "--help")
	assert.Equal(t, exitOK, code)
}

func TestRun_storeErrors(t *testing.T) {
	empty := t.TempDir()
	code, _, errOut := ledgerctl(t, "audit", "--quiet", "--data", empty)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "no ledger stream in "+empty)
	// nothing listening: a clear error at once, not a retry loop
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	code, _, errOut = ledgerctl(t, "audit", "--quiet", "--nats", "nats://"+addr)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "connect nats nats://"+addr)
	code, _, errOut = ledgerctl(t, "cluster", "--nats", "nats://"+addr)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "connect nats nats://"+addr)
	code, _, _ = ledgerctl(t, "events", "--site", "s1", "--data", filepath.Join(empty, "missing"))
	assert.Equal(t, exitError, code)
	// generate refuses to write into an existing ledger
	code, _, _ = ledgerctl(t, "generate", "--quiet", "--data", empty, "--events", "500", "--sites", "1")
	require.Equal(t, exitOK, code)
	code, _, errOut = ledgerctl(t, "generate", "--quiet", "--data", empty, "--events", "500")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "already holds a ledger")
}

// TestRun_generateAuditEvents drives the three commands on one data
// directory, offline, as an operator would.
func TestRun_generateAuditEvents(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	code, out, errOut := ledgerctl(t, "generate", "--data", dir, "--events", "20000", "--sites", "4", "--batch", "50", "--seed", "3")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "generated 20000 events in 401 messages over 4 sites")
	assert.Contains(t, errOut, "100.0%")

	code, out, errOut = ledgerctl(t, "audit", "--data", dir)
	require.Equal(t, exitOK, code, "%s\n%s", out, errOut)
	assert.Contains(t, out, "RESULT: PASS")
	assert.Contains(t, out, "site s1: ")
	assert.Contains(t, out, "[pass] live-model: snapshot at seq")
	assert.Contains(t, out, "[pass] hash-chain")
	assert.Contains(t, errOut, "events/s", "progress on stderr")

	code, out, errOut = ledgerctl(t, "audit", "--data", dir, "--json", "--quiet")
	require.Equal(t, exitOK, code, errOut)
	assert.Empty(t, errOut)
	var rep audit.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.True(t, rep.OK)
	assert.Equal(t, uint64(20000), rep.Events)
	require.Len(t, rep.Sites, 4)
	for _, s := range rep.Sites {
		assert.True(t, s.OK)
		assert.Equal(t, s.Balance, s.Adjustments.Amount+s.Deposits["approved"].Amount-s.Withdrawals["paid"].Amount)
		assert.Equal(t, s.PendingWithdrawals, s.Withdrawals["pending"].Amount+s.Withdrawals["processing"].Amount)
		c, ok := s.Check(audit.CheckLiveModel)
		require.True(t, ok)
		assert.Equal(t, audit.Pass, c.Status)
	}

	code, out, _ = ledgerctl(t, "audit", "--data", dir, "--site", "s2", "--quiet", "--workers", "1")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "site s2: ")
	assert.NotContains(t, out, "site s1: ")

	code, out, errOut = ledgerctl(t, "events", "--data", dir, "--site", "s3", "--limit", "5")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 5)
	lineRE := regexp.MustCompile(`^#\d+\.\d+ \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \S+ [a-z_.]+\.v\d+( \S+=\S.*)*$`)
	for _, l := range lines {
		assert.Regexp(t, lineRE, l)
	}
	assert.Regexp(t, `^#4\.0 \S+ op-audit-generator site\.created\.v2 id=s3 .*secret=\[redacted\] webhookSecret=\[redacted\]`, lines[0])
	assert.Contains(t, lines[1], "treasury.adjusted.v3 amount=1000000000")

	code, out, _ = ledgerctl(t, "events", "--data", dir, "--site", "s3", "--from", "300", "--limit", "2", "--json")
	require.Equal(t, exitOK, code)
	jl := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, jl, 2)
	var item struct {
		Seq  uint64         `json:"seq"`
		Name string         `json:"name"`
		Data map[string]any `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(jl[0]), &item))
	assert.GreaterOrEqual(t, item.Seq, uint64(300))
	assert.NotEmpty(t, item.Data)

	// A site that has no event at all does not exist: a typo in --site
	// must not pass as an empty history.
	code, out, errOut = ledgerctl(t, "events", "--data", dir, "--site", "nobody")
	assert.Equal(t, exitMismatch, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "no such site")

	// A known site listed from past its last event is an empty listing.
	code, out, errOut = ledgerctl(t, "events", "--data", dir, "--site", "s3", "--from", "1000000")
	assert.Equal(t, exitOK, code, errOut)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "no events from seq 1000000")
}

// TestRun_auditFails: a history with a forbidden transition (a pending
// withdrawal paid, appended with a correct chain) makes the audit exit 1
// and name the event.
func TestRun_auditFails(t *testing.T) {
	srv := testkit.StartServer(t, jsstore.ServerConfig{})
	dir := srv.Dir()
	ctx := context.Background()
	st := srv.Store("test")
	gen, err := audit.Generate(ctx, st, audit.GenOptions{Events: 3000, Sites: 2, Seed: 8})
	require.NoError(t, err)
	s := gen.Sites[0].State
	var i int32 = -1
	for k := range s.Txs {
		if s.Txs[k].Kind == aggregates.KindWithdrawal && s.Txs[k].Status == aggregates.StatusPending {
			i = int32(k)
			break
		}
	}
	require.GreaterOrEqual(t, i, int32(0))
	p := &events.WithdrawalPaid{TxID: string(ids.NewTx(s.ID, i))}
	pos := gen.Sites[0].Position
	data, _, err := events.Seal(pos.Hash, []events.Event{{Name: p.EventName(), Time: time.Now().UnixMilli(), Actor: "op-x", Payload: p}})
	require.NoError(t, err)
	subj, err := events.SiteSubject(s.ID)
	require.NoError(t, err)
	seq, err := st.Append(ctx, subj, pos.Seq, data)
	require.NoError(t, err)
	srv.Stop()

	code, out, _ := ledgerctl(t, "audit", "--data", dir, "--quiet")
	assert.Equal(t, exitMismatch, code)
	assert.Contains(t, out, "[FAIL] transitions")
	assert.Contains(t, out, fmt.Sprintf("#%d.0 withdrawal.paid.v1: %s: withdrawal pending → paid is not an edge", seq, p.TxID))
	assert.Contains(t, out, "RESULT: FAIL (1 checks failed; 1 of 2 sites failed)")

	code, out, _ = ledgerctl(t, "audit", "--data", dir, "--quiet", "--json")
	assert.Equal(t, exitMismatch, code)
	var rep audit.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.False(t, rep.OK)
	assert.Equal(t, 1, rep.FailedChecks)

	// The other site alone is fine.
	code, _, _ = ledgerctl(t, "audit", "--data", dir, "--quiet", "--site", gen.Sites[1].ID)
	assert.Equal(t, exitOK, code)
}

// TestRun_auditOnline audits a running server over --nats and compares with
// a gateway's operator API.
func TestRun_auditOnline(t *testing.T) {
	srv := testkit.StartServer(t, jsstore.ServerConfig{Listen: "127.0.0.1:-1"})
	ctx := context.Background()
	gen, err := audit.Generate(ctx, srv.Store("test"), audit.GenOptions{Events: 3000, Sites: 3, Seed: 4, SnapshotAt: 0.5})
	require.NoError(t, err)

	code, out, errOut := ledgerctl(t, "audit", "--nats", srv.URL(), "--quiet")
	require.Equal(t, exitOK, code, "%s\n%s", out, errOut)
	assert.Contains(t, out, "RESULT: PASS (3 sites")

	var off atomic.Value
	off.Store("")
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		for _, g := range gen.Sites {
			if r.URL.Path == "/ops/v1/sites/"+g.ID {
				pend := g.PendingWithdrawals
				if g.ID == off.Load().(string) {
					pend += 7
				}
				fmt.Fprintf(w, `{"data":{"id":%q,"treasury":{"balance":%d,"pendingWithdrawals":%d,"currency":"IQD"}},"status":200}`, g.ID, g.Balance, pend)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	defer gw.Close()
	code, out, _ = ledgerctl(t, "audit", "--nats", srv.URL(), "--quiet", "--gateway", gw.URL, "--token", "tok")
	assert.Equal(t, exitOK, code, out)
	assert.Contains(t, out, "[pass] gateway")

	off.Store(gen.Sites[2].ID)
	code, out, _ = ledgerctl(t, "audit", "--nats", srv.URL(), "--quiet", "--gateway", gw.URL, "--token", "tok")
	assert.Equal(t, exitMismatch, code)
	assert.Contains(t, out, fmt.Sprintf("the gateway shows pending withdrawals %d, the replay %d", gen.Sites[2].PendingWithdrawals+7, gen.Sites[2].PendingWithdrawals))
}

// natsEnv are the credential variables ledgerctl reads.
var natsEnv = []string{"GATEWAY_NATS_USER", "GATEWAY_NATS_PASSWORD", "GATEWAY_NATS_PASSWORD_FILE", "GATEWAY_NATS_NKEY_SEED_FILE"}

// TestRun_natsCredentials audits over --nats a server that accepts one
// credential, the way the gateway's embedded server does with --nats-listen:
// presented through flags, files or the environment it reads the ledger;
// without it, or with another, the store cannot be read (exit 3); an
// incomplete one is a usage error.
func TestRun_natsCredentials(t *testing.T) {
	dir := t.TempDir()
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	seed, err := kp.Seed()
	require.NoError(t, err)
	other, err := nkeys.CreateUser()
	require.NoError(t, err)
	otherSeed, err := other.Seed()
	require.NoError(t, err)
	pwFile := testkit.SecretFile(t, dir, "pw", "audit-pw\n")
	seedFile, otherFile := testkit.SecretFile(t, dir, "seed", string(seed)+"\n"), testkit.SecretFile(t, dir, "other", string(otherSeed)+"\n")

	urls := map[string]string{}
	for kind, auth := range map[string]jsstore.Auth{"password": {User: "gw", Password: "audit-pw"}, "nkey": {NkeySeed: string(seed)}} {
		// The store's connection presents the server's credentials.
		srv := testkit.StartServer(t, jsstore.ServerConfig{Listen: "127.0.0.1:-1", Auth: auth})
		_, err = audit.Generate(context.Background(), srv.Store("test"), audit.GenOptions{Events: 500, Sites: 2, Seed: 5})
		require.NoError(t, err)
		urls[kind] = srv.URL()
	}

	cases := []struct {
		name     string
		server   string
		args     []string
		env      map[string]string
		wantCode int
		wantErr  string
	}{
		{name: "password flags", server: "password", args: []string{"--nats-user", "gw", "--nats-password", "audit-pw"}, wantCode: exitOK},
		{name: "password file", server: "password", args: []string{"--nats-user", "gw", "--nats-password-file", pwFile}, wantCode: exitOK},
		{name: "password from env", server: "password", env: map[string]string{"GATEWAY_NATS_USER": "gw", "GATEWAY_NATS_PASSWORD": "audit-pw"}, wantCode: exitOK},
		{name: "password file from env", server: "password", env: map[string]string{"GATEWAY_NATS_USER": "gw", "GATEWAY_NATS_PASSWORD_FILE": pwFile}, wantCode: exitOK},
		{name: "no credentials", server: "password", wantCode: exitError, wantErr: "Authorization Violation"},
		{name: "wrong password", server: "password", args: []string{"--nats-user", "gw", "--nats-password", "guess"}, wantCode: exitError, wantErr: "Authorization Violation"},
		{name: "user without password", server: "password", args: []string{"--nats-user", "gw"}, wantCode: exitUsage, wantErr: "--nats-user needs --nats-password"},
		{name: "seed file", server: "nkey", args: []string{"--nats-nkey-seed-file", seedFile}, wantCode: exitOK},
		{name: "seed file from env", server: "nkey", env: map[string]string{"GATEWAY_NATS_NKEY_SEED_FILE": seedFile}, wantCode: exitOK},
		{name: "nkey server, no credentials", server: "nkey", wantCode: exitError, wantErr: "Authorization Violation"},
		{name: "another nkey", server: "nkey", args: []string{"--nats-nkey-seed-file", otherFile}, wantCode: exitError, wantErr: "Authorization Violation"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testkit.SetEnv(t, natsEnv, c.env)
			code, out, errOut := ledgerctl(t, append([]string{"audit", "--quiet", "--nats", urls[c.server]}, c.args...)...)
			assert.Equal(t, c.wantCode, code, "stdout %q stderr %q", out, errOut)
			if c.wantCode == exitOK {
				assert.Contains(t, out, "RESULT: PASS (2 sites")
			}
			assert.Contains(t, errOut, c.wantErr)
		})
	}

	// --data reads offline: credentials in the environment are not used.
	testkit.SetEnv(t, natsEnv, map[string]string{"GATEWAY_NATS_PASSWORD_FILE": filepath.Join(dir, "missing")})
	code, _, errOut := ledgerctl(t, "events", "--site", "s1", "--data", filepath.Join(dir, "no-ledger"))
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "no ledger stream")
}

// TestRun_auditAgainstGateway builds and starts the gateway with its
// embedded server exposed and credentials required, creates a site through
// it, and audits it online: with the gateway's credentials the audit
// passes, without them ledgerctl cannot read the store.
func TestRun_auditAgainstGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gateway")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/iqdgateway/gateway/cmd/gateway").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	natsAddr, httpAddr := testkit.FreeAddr(t), testkit.FreeAddr(t)
	pwFile := testkit.SecretFile(t, dir, "nats-password", "gateway-nats-pw\n")
	const token = "ledgerctl-test-admin-token-0123456789"
	gw := exec.Command(bin, "--http", httpAddr, "--data", filepath.Join(dir, "data"), "--admin-token", token,
		"--nats-listen", natsAddr, "--nats-user", "gw", "--nats-password-file", pwFile, "--log-level", "warn")
	var log bytes.Buffer
	gw.Stdout, gw.Stderr = &log, &log
	require.NoError(t, gw.Start())
	t.Cleanup(func() {
		_ = gw.Process.Kill()
		_ = gw.Wait()
		if t.Failed() {
			t.Logf("gateway log:\n%s", log.String())
		}
	})
	base := "http://" + httpAddr
	testkit.Eventually(t, 60*time.Second, func() bool { return ready(base) }, "the gateway is ready")
	req, err := http.NewRequest(http.MethodPost, base+"/ops/v1/sites", strings.NewReader(`{"name":"Audited"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)

	testkit.SetEnv(t, natsEnv, nil)
	args := []string{"audit", "--quiet", "--nats", "nats://" + natsAddr, "--gateway", base, "--token", token}
	code, stdout, errOut := ledgerctl(t, append(args, "--nats-user", "gw", "--nats-password-file", pwFile)...)
	assert.Equal(t, exitOK, code, "stdout %q stderr %q", stdout, errOut)
	assert.Contains(t, stdout, "RESULT: PASS (1 sites")
	assert.Contains(t, stdout, "[pass] gateway")

	code, _, errOut = ledgerctl(t, args...)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "Authorization Violation")
}

// ready reports whether the gateway at base answers /readyz with 200.
func ready(base string) bool {
	res, err := http.Get(base + "/readyz")
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// TestLedgerctl_refusesARunningGatewaysData: --data on a directory a
// running gateway holds is refused with a clear error, nothing started on
// it; once the gateway is gone, it is read.
func TestLedgerctl_refusesARunningGatewaysData(t *testing.T) {
	dir := t.TempDir()
	code, _, errOut := ledgerctl(t, "generate", "--data", dir, "--events", "200", "--sites", "2", "--batch", "20", "--quiet")
	require.Equal(t, 0, code, errOut)
	release, err := jsstore.LockDir(dir) // what a running gateway holds
	require.NoError(t, err)
	for _, args := range [][]string{{"audit", "--data", dir}, {"events", "--data", dir, "--site", "x"}} {
		code, _, errOut = ledgerctl(t, args...)
		assert.NotEqual(t, 0, code)
		assert.Contains(t, errOut, "the data directory is in use by another process")
		assert.Contains(t, errOut, "stop it first, or read it through its NATS port (--nats)")
	}
	release()
	code, _, errOut = ledgerctl(t, "audit", "--data", dir, "--quiet")
	assert.Equal(t, 0, code, errOut)
}

// TestRun_eventsSaysWhereTheChainBreaks: a message of the site whose
// record is damaged in its block file is dropped by the server; the
// listing names where the site's hash chain breaks and exits 1, instead
// of stepping over the gap without a word (and the audit fails).
func TestRun_eventsSaysWhereTheChainBreaks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	code, _, errOut := ledgerctl(t, "generate", "--quiet", "--data", dir, "--events", "300", "--sites", "1", "--batch", "1", "--seed", "7", "--snapshot-at", "0")
	require.Equal(t, exitOK, code, errOut)
	code, out, errOut := ledgerctl(t, "events", "--data", dir, "--site", "s1")
	require.Equal(t, exitOK, code, errOut)
	require.NotContains(t, errOut, "breaks")
	intact := strings.Count(out, "\n")

	// One byte of the 100th record's payload flipped: its checksum fails.
	blocks, err := filepath.Glob(filepath.Join(dir, "jetstream", "*", "streams", "LEDGER", "msgs", "*.blk"))
	require.NoError(t, err)
	require.Len(t, blocks, 1)
	b, err := os.ReadFile(blocks[0])
	require.NoError(t, err)
	subj := []byte("ledger.site.s1")
	at := -1
	for i, off := 0, 0; i < 100; i++ {
		k := bytes.Index(b[off:], subj)
		require.GreaterOrEqual(t, k, 0, "record %d", i)
		at, off = off+k, off+k+len(subj)
	}
	b[at+len(subj)+40] ^= 0xff
	require.NoError(t, os.WriteFile(blocks[0], b, 0o600))

	code, out, errOut = ledgerctl(t, "events", "--data", dir, "--site", "s1")
	assert.Equal(t, exitMismatch, code, errOut)
	assert.Contains(t, errOut, "the hash chain breaks before #")
	assert.Less(t, strings.Count(out, "\n"), intact)
	code, out, _ = ledgerctl(t, "audit", "--data", dir, "--quiet")
	assert.Equal(t, exitMismatch, code)
	assert.Contains(t, out, "RESULT: FAIL")
}

// failingWriter refuses every write, as a full disk or a closed pipe.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestRun_generateReportUnwritable: a report that cannot be written is a
// failure (exit 3) said on stderr, as for audit and events, though the
// history is written.
func TestRun_generateReportUnwritable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var errOut bytes.Buffer
	code := run([]string{"generate", "--quiet", "--data", dir, "--events", "100", "--sites", "1"}, failingWriter{}, &errOut)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut.String(), "the history is written, but its report could not be")
	code, out, _ := ledgerctl(t, "audit", "--quiet", "--data", dir)
	assert.Equal(t, exitOK, code, out)
}
