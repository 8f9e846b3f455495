package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/events/jsstore"
	"github.com/iqdgateway/gateway/internal/testkit"
)

// TestMain lets the test binary act as the gateway in a subprocess, so the
// restart test runs the real command without a separate build step.
func TestMain(m *testing.M) {
	if os.Getenv("GATEWAY_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func TestParseFlags(t *testing.T) {
	dir := t.TempDir()
	tokenFile := testkit.SecretFile(t, dir, "token", "  "+testToken+"\n")
	shortFile := testkit.SecretFile(t, dir, "short", "tok\n")
	emptyFile := testkit.SecretFile(t, dir, "empty", " \n")
	seed := newSeed(t)
	seedFile := testkit.SecretFile(t, dir, "seed", seed)
	pwFile := testkit.SecretFile(t, dir, "pw", "nats-pw\n")
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(t *testing.T, o options)
		wantErr string
	}{
		{name: "defaults", check: func(t *testing.T, o options) {
			assert.Equal(t, "127.0.0.1:8080", o.http)
			assert.Equal(t, "./data", o.data)
			assert.Equal(t, "always", o.sync)
			assert.Equal(t, "", o.nats)
			assert.False(t, o.cb.allowPrivate)
			assert.Len(t, o.cb.retry, 7)
		}},
		{name: "env", env: map[string]string{"GATEWAY_HTTP": "0.0.0.0:9000", "GATEWAY_SYNC": "interval", "GATEWAY_DATA": "/x",
			"GATEWAY_ADMIN_TOKEN": testToken, "GATEWAY_CALLBACK_ALLOW_PRIVATE": "true", "GATEWAY_CALLBACK_RETRY": "1s,2s"},
			check: func(t *testing.T, o options) {
				assert.Equal(t, "0.0.0.0:9000", o.http)
				assert.Equal(t, "interval", o.sync)
				assert.Equal(t, "/x", o.data)
				assert.Equal(t, testToken, o.adminToken)
				assert.True(t, o.cb.allowPrivate)
				assert.Equal(t, "1s,2s", o.cb.retry.String())
			}},
		{name: "flag beats env", args: []string{"--sync", "always"}, env: map[string]string{"GATEWAY_SYNC": "interval"},
			check: func(t *testing.T, o options) { assert.Equal(t, "always", o.sync) }},
		{name: "demo allows private callbacks", args: []string{"--demo"},
			check: func(t *testing.T, o options) { assert.True(t, o.cb.allowPrivate) }},
		{name: "bad sync", args: []string{"--sync", "sometimes"}, wantErr: "--sync"},
		{name: "docs url", args: []string{"--docs-url", "https://docs.example/gateway"},
			check: func(t *testing.T, o options) { assert.Equal(t, "https://docs.example/gateway", o.docsURL) }},
		{name: "docs url by env", env: map[string]string{"GATEWAY_DOCS_URL": "http://10.0.0.5/docs"},
			check: func(t *testing.T, o options) { assert.Equal(t, "http://10.0.0.5/docs", o.docsURL) }},
		{name: "docs url not absolute", args: []string{"--docs-url", "/docs"}, wantErr: "--docs-url must be an absolute http or https URL"},
		{name: "docs url with a fragment", args: []string{"--docs-url", "https://d.example/x#errors"}, wantErr: "--docs-url"},
		{name: "docs url of another scheme", args: []string{"--docs-url", "javascript:alert(1)"}, wantErr: "--docs-url"},
		{name: "nats start timeout by default", check: func(t *testing.T, o options) { assert.Equal(t, 2*time.Minute, o.natsStartTimeout) }},
		{name: "nats start timeout", args: []string{"--nats-start-timeout", "10m"},
			check: func(t *testing.T, o options) { assert.Equal(t, 10*time.Minute, o.natsStartTimeout) }},
		{name: "nats start timeout by env", env: map[string]string{"GATEWAY_NATS_START_TIMEOUT": "90s"},
			check: func(t *testing.T, o options) { assert.Equal(t, 90*time.Second, o.natsStartTimeout) }},
		{name: "nats start timeout flag beats env", args: []string{"--nats-start-timeout", "3m"}, env: map[string]string{"GATEWAY_NATS_START_TIMEOUT": "90s"},
			check: func(t *testing.T, o options) { assert.Equal(t, 3*time.Minute, o.natsStartTimeout) }},
		{name: "nats start timeout that is no duration by env", env: map[string]string{"GATEWAY_NATS_START_TIMEOUT": "5"},
			wantErr: `GATEWAY_NATS_START_TIMEOUT must be a duration such as 5m, not "5"`},
		{name: "nats start timeout zero", args: []string{"--nats-start-timeout", "0s"}, wantErr: "--nats-start-timeout must be positive, not 0s"},
		{name: "memory limit", args: []string{"--admin-token", testToken, "--memory-limit", "450MiB"},
			check: func(t *testing.T, o options) { assert.Equal(t, "450MiB", o.memoryLimit) }},
		{name: "memory limit from env", env: map[string]string{"GATEWAY_MEMORY_LIMIT": "2GiB"}, args: []string{"--admin-token", testToken},
			check: func(t *testing.T, o options) { assert.Equal(t, "2GiB", o.memoryLimit) }},
		{name: "memory limit that is no size", args: []string{"--memory-limit", "450MB"}, wantErr: "--memory-limit"},
		{name: "no batches when the gateway fsyncs its embedded store", check: func(t *testing.T, o options) {
			assert.Equal(t, 0, o.batchMin)
			assert.True(t, storeSyncs(o))
			assert.Equal(t, time.Second, serverSyncInterval(o))
		}},
		{name: "batches when the embedded server fsyncs for other clients", args: []string{"--nats-listen", "127.0.0.1:4222", "--nats-listen-insecure"},
			check: func(t *testing.T, o options) {
				assert.Equal(t, 16, o.batchMin)
				assert.False(t, storeSyncs(o))
			}},
		{name: "no batches without fsync", args: []string{"--sync", "interval"}, check: func(t *testing.T, o options) {
			assert.Equal(t, 0, o.batchMin)
			assert.False(t, storeSyncs(o))
			assert.Zero(t, serverSyncInterval(o))
		}},
		{name: "no batches on a replicated stream", args: []string{"--nats", "nats://a:4222", "--replicas", "3"},
			check: func(t *testing.T, o options) { assert.Equal(t, 0, o.batchMin) }},
		{name: "batches on an external single server", args: []string{"--nats", "nats://a:4222"},
			check: func(t *testing.T, o options) {
				assert.Equal(t, 16, o.batchMin)
				assert.False(t, storeSyncs(o))
			}},
		{name: "batch-min set", args: []string{"--batch-min", "5"}, check: func(t *testing.T, o options) { assert.Equal(t, 5, o.batchMin) }},
		{name: "batch-min by env", env: map[string]string{"GATEWAY_BATCH_MIN": "0"}, check: func(t *testing.T, o options) { assert.Equal(t, 0, o.batchMin) }},
		{name: "bad batch-min", args: []string{"--batch-min", "-2"}, wantErr: "--batch-min must be -1"},
		{name: "bad batch-min by env", env: map[string]string{"GATEWAY_BATCH_MIN": "lots"}, wantErr: `GATEWAY_BATCH_MIN must be a whole number, not "lots"`},
		{name: "bad retry", args: []string{"--callback-retry", "1s,soon"}, wantErr: "--callback-retry"},
		{name: "stray argument", args: []string{"serve"}, wantErr: "unexpected argument"},
		{name: "callbacks delivered here by default", check: func(t *testing.T, o options) {
			assert.True(t, o.callbacks)
			assert.Equal(t, 30*time.Second, o.cb.ackWait)
			assert.Equal(t, 10*time.Second, o.cb.leaseTTL)
		}},
		{name: "callbacks elsewhere", args: []string{"--callbacks=false", "--callback-ack-wait", "1m"}, check: func(t *testing.T, o options) {
			assert.False(t, o.callbacks)
			assert.Equal(t, time.Minute, o.cb.ackWait)
		}},
		{name: "callbacks elsewhere by env", env: map[string]string{"GATEWAY_CALLBACKS": "false"},
			check: func(t *testing.T, o options) { assert.False(t, o.callbacks) }},
		{name: "ack wait too short", args: []string{"--callback-ack-wait", "1s"}, wantErr: "--callback-ack-wait"},
		{name: "text logs by default", check: func(t *testing.T, o options) { assert.Equal(t, "text", o.logFormat) }},
		{name: "json logs", args: []string{"--log-format", "json"}, check: func(t *testing.T, o options) { assert.Equal(t, "json", o.logFormat) }},
		{name: "json logs by env", env: map[string]string{"GATEWAY_LOG_FORMAT": "json"},
			check: func(t *testing.T, o options) { assert.Equal(t, "json", o.logFormat) }},
		{name: "lease too short", args: []string{"--callback-lease-ttl", "10ms"}, wantErr: "--callback-lease-ttl"},

		{name: "nats-listen needs credentials", args: []string{"--nats-listen", "127.0.0.1:4222"},
			wantErr: "--nats-listen exposes the ledger stream, which holds every site's secrets, so it needs credentials: --nats-user"},
		{name: "nats-listen with a user and password", args: []string{"--nats-listen", "127.0.0.1:4222", "--nats-user", "gw", "--nats-password", "pw"},
			check: func(t *testing.T, o options) { assert.Equal(t, jsstore.Auth{User: "gw", Password: "pw"}, o.natsAuth) }},
		{name: "nats-listen with credentials from env", args: []string{"--nats-listen", "127.0.0.1:4222"},
			env: map[string]string{"GATEWAY_NATS_USER": "gw", "GATEWAY_NATS_PASSWORD_FILE": pwFile},
			check: func(t *testing.T, o options) {
				assert.Equal(t, jsstore.Auth{User: "gw", Password: "nats-pw"}, o.natsAuth)
			}},
		{name: "nats-listen with an nkey seed", args: []string{"--nats-listen", "127.0.0.1:4222", "--nats-nkey-seed-file", seedFile},
			check: func(t *testing.T, o options) { assert.Equal(t, strings.TrimSpace(seed), o.natsAuth.NkeySeed) }},
		{name: "nats-listen insecure", args: []string{"--nats-listen", "127.0.0.1:4222", "--nats-listen-insecure"},
			check: func(t *testing.T, o options) { assert.True(t, o.natsAuth.IsZero()) }},
		{name: "nats-listen insecure by env", env: map[string]string{"GATEWAY_NATS_LISTEN": "127.0.0.1:4222", "GATEWAY_NATS_LISTEN_INSECURE": "true"},
			check: func(t *testing.T, o options) { assert.True(t, o.natsListenInsecure) }},
		{name: "credentials for --nats", args: []string{"--nats", "nats://a:4222", "--nats-user", "gw", "--nats-password", "pw"},
			check: func(t *testing.T, o options) { assert.Equal(t, "user gw", o.natsAuth.String()) }},
		{name: "incomplete credentials", args: []string{"--nats", "nats://a:4222", "--nats-user", "gw"}, wantErr: "--nats-user needs --nats-password"},

		{name: "short admin token", args: []string{"--admin-token", "tok"},
			wantErr: "--admin-token must be at least 32 characters, not 3: generate one with 'openssl rand -base64 33'"},
		{name: "short admin token by env", env: map[string]string{"GATEWAY_ADMIN_TOKEN": testToken[:31]}, wantErr: "at least 32 characters, not 31"},
		{name: "admin token file", args: []string{"--admin-token-file", tokenFile},
			check: func(t *testing.T, o options) { assert.Equal(t, testToken, o.adminToken) }},
		{name: "admin token file by env", env: map[string]string{"GATEWAY_ADMIN_TOKEN_FILE": tokenFile},
			check: func(t *testing.T, o options) { assert.Equal(t, testToken, o.adminToken) }},
		{name: "short admin token file", args: []string{"--admin-token-file", shortFile}, wantErr: "the token in --admin-token-file must be at least 32"},
		{name: "empty admin token file", args: []string{"--admin-token-file", emptyFile}, wantErr: "is empty"},
		{name: "missing admin token file", args: []string{"--admin-token-file", filepath.Join(dir, "none")}, wantErr: "--admin-token-file"},
		{name: "admin token twice", args: []string{"--admin-token", testToken, "--admin-token-file", tokenFile}, wantErr: "not both"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testkit.SetEnv(t, gatewayEnv, c.env)
			o, err := parseFlags(c.args, io.Discard)
			checkParsed(t, o, err, c.wantErr, c.check)
		})
	}
}

// gatewayEnv are the environment variables the flag tests control.
var gatewayEnv = []string{"GATEWAY_HTTP", "GATEWAY_SYNC", "GATEWAY_DATA", "GATEWAY_ADMIN_TOKEN", "GATEWAY_ADMIN_TOKEN_FILE",
	"GATEWAY_CALLBACK_ALLOW_PRIVATE", "GATEWAY_CALLBACK_RETRY", "GATEWAY_CALLBACKS", "GATEWAY_NATS", "GATEWAY_NATS_LISTEN",
	"GATEWAY_NATS_LISTEN_INSECURE", "GATEWAY_NATS_USER", "GATEWAY_NATS_PASSWORD", "GATEWAY_NATS_PASSWORD_FILE",
	"GATEWAY_NATS_NKEY_SEED_FILE", "GATEWAY_LOG_FORMAT", "GATEWAY_LOG_LEVEL", "GATEWAY_BATCH_MIN",
	"GATEWAY_MEMORY_LIMIT", "GATEWAY_DOCS_URL", "GATEWAY_NATS_START_TIMEOUT"}

// newSeed returns a fresh user nkey seed, with a newline as 'nk -gen user'
// writes it.
func newSeed(t *testing.T) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	seed, err := kp.Seed()
	require.NoError(t, err)
	return string(seed) + "\n"
}

// TestParseFlags_helpHidesSecrets: -help prints each flag's default; a
// token or password from the environment must not be one.
func TestParseFlags_helpHidesSecrets(t *testing.T) {
	testkit.SetEnv(t, gatewayEnv, map[string]string{"GATEWAY_ADMIN_TOKEN": testToken, "GATEWAY_NATS_USER": "gw", "GATEWAY_NATS_PASSWORD": "env-secret-pw"})
	var help bytes.Buffer
	_, err := parseFlags([]string{"-help"}, &help)
	require.ErrorIs(t, err, flag.ErrHelp)
	assert.Contains(t, help.String(), "GATEWAY_ADMIN_TOKEN")
	assert.NotContains(t, help.String(), testToken)
	assert.NotContains(t, help.String(), "env-secret-pw")
}

// TestRun_natsListenWithoutCredentials: the refusal is a usage error
// (exit 2) whose message names the fix.
func TestRun_natsListenWithoutCredentials(t *testing.T) {
	testkit.SetEnv(t, gatewayEnv, nil)
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"--nats-listen", "127.0.0.1:0", "--data", t.TempDir()}, io.Discard, &stderr)
	assert.Equal(t, 2, code)
	for _, fix := range []string{"--nats-user", "--nats-password-file", "--nats-nkey-seed-file", "--nats-listen-insecure"} {
		assert.Contains(t, stderr.String(), fix)
	}
	stderr.Reset()
	code = run(context.Background(), []string{"--admin-token", "short"}, io.Discard, &stderr)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr.String(), "--admin-token must be at least 32 characters")
}

// TestRun_portTaken: a gateway whose --http address is taken says so and
// names the flag that picks another.
func TestRun_portTaken(t *testing.T) {
	testkit.SetEnv(t, gatewayEnv, nil)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"--http", taken.Addr().String(), "--data", t.TempDir(), "--admin-token", testToken},
		io.Discard, &stderr)
	assert.Equal(t, 1, code, stderr.String())
	assert.Contains(t, stderr.String(), "address already in use")
	assert.Contains(t, stderr.String(), "--http (GATEWAY_HTTP)")
}

// TestRun_natsStartTimeout: an embedded server not ready within
// --nats-start-timeout stops the gateway (exit 1) with an error that says
// what it waited for and names the flag that gives it longer.
func TestRun_natsStartTimeout(t *testing.T) {
	testkit.SetEnv(t, gatewayEnv, nil)
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"--http", "127.0.0.1:0", "--data", t.TempDir(), "--admin-token", testToken,
		"--nats-start-timeout", "1ns"}, io.Discard, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "embedded nats: not ready in time: waited 1ns for the server to")
	assert.Contains(t, stderr.String(), "--nats-start-timeout (GATEWAY_NATS_START_TIMEOUT, 1ns now) gives it longer")
}

// checkParsed judges one flag-parsing case: the error it wants, or the
// options check passes.
func checkParsed[O any](t *testing.T, o O, err error, wantErr string, check func(*testing.T, O)) {
	t.Helper()
	if wantErr != "" {
		require.Error(t, err)
		assert.Contains(t, err.Error(), wantErr)
		return
	}
	require.NoError(t, err)
	check(t, o)
}

func TestParseDispatcherFlags(t *testing.T) {
	testkit.SetEnv(t, gatewayEnv, nil)
	seedFile := testkit.SecretFile(t, t.TempDir(), "seed", newSeed(t))
	cases := []struct {
		name    string
		args    []string
		check   func(t *testing.T, o dispatcherOptions)
		wantErr string
	}{
		{name: "needs --nats", wantErr: "--nats is required"},
		{name: "flags", args: []string{"--nats", "nats://a:4222", "--callback-retry", "1s,2s", "--callback-allow-private",
			"--public-url", "https://pay.example"}, check: func(t *testing.T, o dispatcherOptions) {
			assert.Equal(t, "nats://a:4222", o.nats)
			assert.Equal(t, "1s,2s", o.cb.retry.String())
			assert.True(t, o.cb.allowPrivate)
			assert.Equal(t, "https://pay.example", o.publicURL)
			assert.Equal(t, 1, o.replicas)
			assert.Equal(t, "127.0.0.1:8081", o.http, "next to a gateway's default 8080")
			assert.Equal(t, "text", o.logFormat)
		}},
		{name: "listener and json logs", args: []string{"--nats", "nats://a:4222", "--http", "10.0.0.7:9100", "--log-format", "json"},
			check: func(t *testing.T, o dispatcherOptions) {
				assert.Equal(t, "10.0.0.7:9100", o.http)
				assert.Equal(t, "json", o.logFormat)
			}},
		{name: "no listener address", args: []string{"--nats", "nats://a:4222", "--http", ""}, wantErr: "--http is required"},
		{name: "user and password", args: []string{"--nats", "nats://a:4222", "--nats-user", "gw", "--nats-password", "pw"},
			check: func(t *testing.T, o dispatcherOptions) {
				assert.Equal(t, jsstore.Auth{User: "gw", Password: "pw"}, o.natsAuth)
			}},
		{name: "nkey seed", args: []string{"--nats", "nats://a:4222", "--nats-nkey-seed-file", seedFile},
			check: func(t *testing.T, o dispatcherOptions) { assert.Contains(t, o.natsAuth.String(), "nkey U") }},
		{name: "password without user", args: []string{"--nats", "nats://a:4222", "--nats-password", "pw"}, wantErr: "needs --nats-user"},
		{name: "bad retry", args: []string{"--nats", "nats://a", "--callback-retry", "x"}, wantErr: "--callback-retry"},
		{name: "stray argument", args: []string{"--nats", "nats://a", "now"}, wantErr: "unexpected argument"},
		{name: "memory limit", args: []string{"--nats", "nats://a", "--memory-limit", "1GiB"},
			check: func(t *testing.T, o dispatcherOptions) { assert.Equal(t, "1GiB", o.memoryLimit) }},
		{name: "memory limit too small", args: []string{"--nats", "nats://a", "--memory-limit", "1MiB"}, wantErr: "less than 64MiB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := parseDispatcherFlags(c.args, io.Discard)
			checkParsed(t, o, err, c.wantErr, c.check)
		})
	}
	assert.Equal(t, 2, run(context.Background(), []string{"callbacks"}, io.Discard, io.Discard), "usage error exits 2")
}

func TestParseProxies(t *testing.T) {
	p, err := parseProxies("10.0.0.0/8, 192.168.1.1")
	require.NoError(t, err)
	require.Len(t, p, 2)
	assert.Equal(t, "192.168.1.1/32", p[1].String())
	_, err = parseProxies("10.0.0.0/33")
	assert.Error(t, err)
}

// TestParseProxies_ipv4Mapped: mapped proxies become IPv4, so that they
// match the (unmapped) peers; a mapped prefix with no IPv4 form is refused.
func TestParseProxies_ipv4Mapped(t *testing.T) {
	p, err := parseProxies("::ffff:10.0.0.0/104, ::ffff:192.168.1.1, 2001:db8::/32")
	require.NoError(t, err)
	require.Len(t, p, 3)
	assert.Equal(t, "10.0.0.0/8", p[0].String())
	assert.Equal(t, "192.168.1.1/32", p[1].String())
	assert.Equal(t, "2001:db8::/32", p[2].String())
	_, err = parseProxies("10.0.0.0/8, ::ffff:0:0/95")
	assert.ErrorContains(t, err, "::ffff:0:0/95")
}

// testToken is the subprocesses' --admin-token: long enough to be accepted.
const testToken = "test-admin-token-0123456789abcdefgh"

func startGateway(t *testing.T, dir, addr string) (*exec.Cmd, *testkit.Buffer) {
	t.Helper()
	return startWith(t, addr, "--data", dir)
}

type envelope struct {
	Data   json.RawMessage `json:"data"`
	Status int             `json:"status"`
	Code   string          `json:"code"`
}

func call(method, u string, hdr map[string]string, body string) (envelope, error) {
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		return envelope{}, err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return envelope{}, err
	}
	defer res.Body.Close()
	var e envelope
	if err := json.NewDecoder(res.Body).Decode(&e); err != nil {
		return envelope{}, fmt.Errorf("status %d: %w", res.StatusCode, err)
	}
	return e, nil
}

func opsCall(t *testing.T, base, method, path string, body any, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	e, err := call(method, base+path, map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json"}, string(b))
	require.NoError(t, err)
	require.Equal(t, 200, e.Status, "%s %s: %s", method, path, e.Code)
	if out != nil {
		require.NoError(t, json.Unmarshal(e.Data, out))
	}
}

type creds struct{ ID, AppKey, Secret string }

func merchant(c creds, method, base, path, payload string) (envelope, error) {
	m := hmac.New(sha256.New, []byte(c.Secret))
	m.Write([]byte(payload))
	h := map[string]string{"appKey": c.AppKey, "sign": base64.StdEncoding.EncodeToString(m.Sum(nil)),
		"Content-Type": "application/x-www-form-urlencoded"}
	if method == http.MethodGet {
		if payload != "" {
			path += "?" + payload
		}
		return call(method, base+path, h, "")
	}
	return call(method, base+path, h, payload)
}

type acked struct {
	site  int
	form  string
	kind  string
	pid   string
	txID  string
	amt   int64
	state string
}

// TestRestartAfterKill kills the gateway with SIGKILL while merchants are
// writing, starts it again on the same data and checks that every
// acknowledged transaction survived as it was acknowledged: with one site
// (group commit in one message); with many, whose appends share the
// gateway's fsyncs (docs/ARCHITECTURE.md, "One fsync for many sites"); and
// with many whose appends travel together in atomic batches
// (docs/ARCHITECTURE.md, "Group commit across sites"), so the kill lands in
// the middle of batches.
func TestRestartAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway subprocesses")
	}
	for _, tc := range []struct {
		name  string
		sites int
		args  []string
	}{
		{"one site", 1, nil},
		{"many sites", 16, nil},
		{"cross-site batches", 16, []string{"--batch-min", "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) { restartAfterKill(t, tc.sites, tc.args) })
	}
}

func restartAfterKill(t *testing.T, sites int, args []string) {
	dir, addr := t.TempDir(), testkit.FreeAddr(t)
	start := func() *exec.Cmd {
		cmd, _ := startWith(t, addr, append([]string{"--data", dir}, args...)...)
		return cmd
	}
	cmd := start()
	base := "http://" + addr
	opsCall(t, base, "POST", "/ops/v1/banks", map[string]any{"code": "ZAINCASH", "name": map[string]string{"en": "ZainCash"},
		"identifierKind": "PHONE", "minAmount": 1000, "maxAmount": 1_000_000, "deposit": true, "withdraw": true,
		"accounts": []map[string]string{{"accountName": "Store", "accountNumber": "07801234567"}}}, nil)
	const funded = 5_000_000
	cs := make([]creds, sites)
	for i := range cs {
		opsCall(t, base, "POST", "/ops/v1/sites", map[string]any{"name": fmt.Sprint("Restart ", i)}, &cs[i])
		opsCall(t, base, "POST", "/ops/v1/sites/"+cs[i].ID+"/adjustments", map[string]any{"amount": funded, "reason": "opening"}, nil)
	}

	var mu sync.Mutex
	var acks []acked
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				site := (w + i) % sites
				kind, path := "deposit", "/v1/transactions/deposit"
				amt := int64(1000 + (w*7+i)%50*100)
				v := url.Values{"bankId": {"ZAINCASH"}, "processId": {fmt.Sprintf("w%d-%d", w, i)}, "amount": {strconv.FormatInt(amt, 10)},
					"userId": {fmt.Sprintf("u%d-%d", w, i)}, "userName": {"user"}, "name": {"End User"}}
				if i%2 == 1 {
					kind, path = "withdrawal", "/v1/transactions/withdraw"
					v.Set("accountName", "End User")
					v.Set("iban", "07712345678")
				}
				form := v.Encode()
				e, err := merchant(cs[site], "POST", base, path, form)
				if err != nil {
					return // the gateway is gone
				}
				if e.Status != 200 {
					continue
				}
				var rec struct {
					TransactionID string `json:"transactionId"`
					Status        string `json:"status"`
				}
				if json.Unmarshal(e.Data, &rec) != nil {
					continue
				}
				mu.Lock()
				acks = append(acks, acked{site: site, form: form, kind: kind, pid: v.Get("processId"), txID: rec.TransactionID, amt: amt, state: rec.Status})
				mu.Unlock()
			}
		}(w)
	}
	// Kill once a good number of writes were acknowledged, while the
	// writers are still going.
	testkit.Eventually(t, 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acks) >= 400
	}, "400 writes acknowledged before the kill")
	if sites > 1 && !slices.Contains(args, "--batch-min") {
		m := scrape(t, base+"/metrics")
		assert.Positive(t, value(m, "gateway_store_fsyncs_total", "outcome", "done"), "the gateway fsyncs the ledger's files")
		assert.Zero(t, value(m, "gateway_store_fsyncs_total", "outcome", "failed"))
		assert.GreaterOrEqual(t, value(m, "gateway_store_fsync_waits_total"), value(m, "gateway_store_fsyncs_total", "outcome", "done"))
	}
	if slices.Contains(args, "--batch-min") {
		assert.Positive(t, value(scrape(t, base+"/metrics"), "gateway_store_batches_total", "outcome", "stored"),
			"appends of different sites travelled in batches")
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	close(stop)
	wg.Wait()
	require.GreaterOrEqual(t, len(acks), 400, "too few writes acknowledged before the kill")

	start()
	pending := make([]int64, sites)
	for _, a := range acks {
		c := cs[a.site]
		e, err := merchant(c, "GET", base, "/v1/transactions", "processId="+url.QueryEscape(a.pid))
		require.NoError(t, err)
		require.Equal(t, 200, e.Status, "acknowledged %s %s lost: %s", a.kind, a.pid, e.Code)
		var rec struct {
			TransactionID string `json:"transactionId"`
			Status        string `json:"status"`
			Amount        int64  `json:"amount"`
		}
		require.NoError(t, json.Unmarshal(e.Data, &rec))
		assert.Equal(t, a.txID, rec.TransactionID)
		assert.Equal(t, a.state, rec.Status)
		assert.Equal(t, a.amt, rec.Amount)
		path := "/v1/transactions/deposit"
		if a.kind == "withdrawal" {
			path = "/v1/transactions/withdraw"
			pending[a.site] += a.amt
		}
		e, err = merchant(c, "POST", base, path, a.form)
		require.NoError(t, err)
		require.Equal(t, 200, e.Status)
		require.NoError(t, json.Unmarshal(e.Data, &rec))
		assert.Equal(t, a.txID, rec.TransactionID, "a repeat of %s must return the same transaction", a.pid)
	}

	// Writes in flight at the kill may have been stored without an answer:
	// each balance must agree with every withdrawal the ledger holds.
	all := 0
	for i, c := range cs {
		total := int64(0)
		cursor := ""
		for {
			var page struct {
				Items []struct {
					Amount int64  `json:"amount"`
					Type   string `json:"type"`
					Status string `json:"status"`
				} `json:"items"`
				NextCursor *string `json:"nextCursor"`
			}
			opsCall(t, base, "GET", "/ops/v1/transactions?site="+c.ID+"&limit=500&cursor="+url.QueryEscape(cursor), nil, &page)
			for _, it := range page.Items {
				all++
				if it.Type == "withdrawal" && it.Status == "pending" {
					total += it.Amount
				}
			}
			if page.NextCursor == nil {
				break
			}
			cursor = *page.NextCursor
		}
		assert.GreaterOrEqual(t, total, pending[i])
		e, err := merchant(c, "GET", base, "/v1/balance", "")
		require.NoError(t, err)
		var bal struct {
			Balance            int64 `json:"balance"`
			PendingWithdrawals int64 `json:"pendingWithdrawals"`
			Available          int64 `json:"available"`
			NegativeLimit      int64 `json:"negativeLimit"`
		}
		require.NoError(t, json.Unmarshal(e.Data, &bal))
		assert.Equal(t, int64(funded), bal.Balance)
		assert.Equal(t, total, bal.PendingWithdrawals)
		assert.Equal(t, bal.Balance-bal.PendingWithdrawals-bal.NegativeLimit, bal.Available)
	}
	assert.GreaterOrEqual(t, all, len(acks))
}

// TestSIGTERMDrains stops the gateway with SIGTERM while merchants are
// writing: it must exit cleanly, and every request it accepted must have
// been answered and be found after a restart.
func TestSIGTERMDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway subprocesses")
	}
	dir, addr := t.TempDir(), testkit.FreeAddr(t)
	cmd, out := startGateway(t, dir, addr)
	base := "http://" + addr
	opsCall(t, base, "POST", "/ops/v1/banks", map[string]any{"code": "ZAINCASH", "name": map[string]string{"en": "ZainCash"},
		"identifierKind": "PHONE", "minAmount": 1000, "maxAmount": 1_000_000, "deposit": true, "withdraw": true,
		"accounts": []map[string]string{{"accountName": "Store", "accountNumber": "07801234567"}}}, nil)
	var c creds
	opsCall(t, base, "POST", "/ops/v1/sites", map[string]any{"name": "Drain"}, &c)

	var mu sync.Mutex
	var answered []string
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				pid := fmt.Sprintf("d%d-%d", w, i)
				v := url.Values{"bankId": {"ZAINCASH"}, "processId": {pid}, "amount": {"5000"},
					"userId": {pid}, "userName": {"user"}, "name": {"End User"}}
				e, err := merchant(c, "POST", base, "/v1/transactions/deposit", v.Encode())
				if err != nil {
					return // refused: the listener is closed
				}
				if e.Status != 200 {
					t.Errorf("request %s answered %d %s during shutdown", pid, e.Status, e.Code)
					return
				}
				mu.Lock()
				answered = append(answered, pid)
				mu.Unlock()
			}
		}(w)
	}
	// SIGTERM once the writers are under way.
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(answered) >= 50
	}, "writers under way")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	err := cmd.Wait()
	require.NoError(t, err, "gateway did not exit cleanly on SIGTERM; log:\n%s", out.String())
	wg.Wait()
	require.NotEmpty(t, answered)

	startGateway(t, dir, addr)
	for _, pid := range answered {
		e, err := merchant(c, "GET", base, "/v1/transactions", "processId="+pid)
		require.NoError(t, err)
		require.Equal(t, 200, e.Status, "answered deposit %s not found after restart", pid)
	}
}

// spawn runs the test binary as the gateway command with args; it is
// killed when the test ends, and its output logged if the test failed.
func spawn(t *testing.T, args ...string) (*exec.Cmd, *testkit.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "GATEWAY_TEST_MAIN=1")
	out := &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s log:\n%s", args[0], out.String())
		}
	})
	return cmd, out
}

// startWith runs the gateway subprocess with extra arguments and waits for
// /readyz.
func startWith(t *testing.T, addr string, args ...string) (*exec.Cmd, *testkit.Buffer) {
	t.Helper()
	cmd, out := spawn(t, append([]string{"--http", addr, "--admin-token", testToken, "--log-level", "warn"}, args...)...)
	// On failure spawn's cleanup logs the gateway's output.
	testkit.Eventually(t, 60*time.Second, func() bool {
		res, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	}, "gateway %s ready", args[0])
	return cmd, out
}

// The lines in which the gateway logs the addresses it took.
var (
	listeningLine = regexp.MustCompile(`msg="gateway listening" http=(\S+)`)
	embeddedLine  = regexp.MustCompile(`msg="embedded JetStream" .*natsListen=(\S+)`)
)

// startOnOwnPorts runs the gateway subprocess on ports it picks itself
// (--http 127.0.0.1:0, and --nats-listen 127.0.0.1:0 when exposeNATS),
// reads from its log the addresses it took, and waits for /readyz. A port
// the test picked and released (testkit.FreeAddr) can be taken by another process
// before the gateway binds it: a busy machine, a parallel `go test ./...`,
// binds ports all the time.
func startOnOwnPorts(t *testing.T, exposeNATS bool, args ...string) (httpAddr, natsAddr string, out *testkit.Buffer) {
	t.Helper()
	own := []string{"--http", "127.0.0.1:0", "--admin-token", testToken, "--log-level", "info"}
	if exposeNATS {
		own = append(own, "--nats-listen", "127.0.0.1:0")
	}
	cmd, out := spawn(t, append(own, args...)...)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_ = cmd.Wait()
	}()
	// Before spawn's cleanup, which then finds the process waited for.
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	logged := func(re *regexp.Regexp) string {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		return ""
	}
	// On failure spawn's cleanup logs the gateway's output.
	testkit.Eventually(t, 60*time.Second, func() bool {
		select {
		case <-exited:
			t.Fatalf("the gateway stopped before it was ready")
		default:
		}
		if httpAddr = logged(listeningLine); httpAddr == "" {
			return false
		}
		res, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	}, "gateway %s ready", args[0])
	if exposeNATS {
		// Logged once the server listens, before the ledger opens.
		natsAddr = logged(embeddedLine)
		require.NotEmpty(t, natsAddr, "the embedded server's address is logged")
	}
	return httpAddr, natsAddr, out
}

// TestDemoIsIdempotent starts --demo twice on one data directory: the same
// site keys are printed, the printed curl works, and no method is doubled.
func TestDemoIsIdempotent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway subprocesses")
	}
	dir := t.TempDir()
	var keys []string
	for run := 0; run < 2; run++ {
		addr := testkit.FreeAddr(t)
		cmd, out := startWith(t, addr, "--demo", "--data", dir)
		var text string
		testkit.Eventually(t, testkit.WaitFor, func() bool {
			text = out.String()
			return strings.Contains(text, "--data '") && strings.Contains(text, "merchant sandbox approve") &&
				strings.Contains(text, "the --admin-token you gave\n")
		}, "the demo request, the sandbox's and the README's variables printed")
		line := func(prefix string) string {
			for _, l := range strings.Split(text, "\n") {
				if f := strings.Fields(l); len(f) == 2 && f[0] == prefix {
					return f[1]
				}
			}
			t.Fatalf("no %s in demo output:\n%s", prefix, text)
			return ""
		}
		c := creds{ID: "demo", AppKey: line("appKey"), Secret: line("secret")}
		// The formats every site's credentials have (docs/merchant-api.md).
		assert.Regexp(t, `^ak_[a-z2-7]{24}$`, c.AppKey)
		assert.Len(t, c.Secret, 43)
		assert.True(t, strings.HasPrefix(line("webhookSecret"), "whsec_"))
		keys = append(keys, c.AppKey+" "+c.Secret)
		assert.Contains(t, text, "\n  export G='http://"+addr+"' SITE=demo APP_KEY='"+c.AppKey+"' SECRET='"+c.Secret+"' SANDBOX_APP_KEY='",
			"the README's variables")
		assert.Contains(t, text, "export TOKEN=…   # the --admin-token you gave", "a token typed on the command line is not echoed")
		body := text[strings.Index(text, "--data '")+len("--data '"):]
		body = body[:strings.Index(body, "'")]
		e, err := merchant(c, "POST", "http://"+addr, "/v1/transactions/deposit", body)
		require.NoError(t, err)
		require.Equal(t, 200, e.Status, "printed demo request refused: %s", e.Code)
		var banks struct{ Items []map[string]any }
		opsCall(t, "http://"+addr, "GET", "/ops/v1/banks", nil, &banks)
		assert.Len(t, banks.Items, 6)
		// Both sites call back to this gateway's demo receiver, at this
		// start's address (the second start listens on another port).
		receiver := "http://" + addr + "/demo/callbacks"
		var sb, live map[string]any
		opsCall(t, "http://"+addr, "GET", "/ops/v1/sites/sandbox", nil, &sb)
		assert.Equal(t, true, sb["sandbox"])
		assert.Equal(t, receiver, sb["callbackUrl"])
		opsCall(t, "http://"+addr, "GET", "/ops/v1/sites/demo", nil, &live)
		assert.Equal(t, receiver, live["callbackUrl"])
		assert.Contains(t, text, "  callbackUrl    "+receiver+" (this gateway: each callback verified and logged as \"demo callback received\")")
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, cmd.Wait())
	}
	assert.Equal(t, keys[0], keys[1], "a second --demo start must keep the demo site")
}

func TestTokenShell(t *testing.T) {
	tests := []struct {
		name string
		o    options
		want string
	}{
		{"generated", options{}, `'gen'\''tok'`},
		{"from the environment", options{adminToken: "x", adminTokenEnv: true}, `"$GATEWAY_ADMIN_TOKEN"`},
		{"from a file", options{adminToken: "x", adminTokenFile: "/etc/gw/token"}, `"$(cat '/etc/gw/token')"`},
		{"typed as a flag: not echoed", options{adminToken: "x"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tokenShell(tc.o, "gen'tok"))
		})
	}
}

// TestExternalNATS runs one gateway on its embedded server with the client
// port exposed (--nats-listen, with a user and password) and a second
// gateway on that server through --nats with the same credentials: a
// deposit made on one is found on the other.
func TestExternalNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway subprocesses")
	}
	natsFlags, _ := natsPassword(t)
	a1, natsAddr, _ := startOnOwnPorts(t, true, append([]string{"--data", t.TempDir()}, natsFlags...)...)
	a2, _, _ := startOnOwnPorts(t, false, append([]string{"--nats", "nats://" + natsAddr}, natsFlags...)...)
	b1, b2 := "http://"+a1, "http://"+a2
	opsCall(t, b1, "POST", "/ops/v1/banks", map[string]any{"code": "ZAINCASH", "name": map[string]string{"en": "ZainCash"},
		"identifierKind": "PHONE", "minAmount": 1000, "maxAmount": 1_000_000, "deposit": true, "withdraw": true,
		"accounts": []map[string]string{{"accountName": "Store", "accountNumber": "07801234567"}}}, nil)
	var c creds
	opsCall(t, b1, "POST", "/ops/v1/sites", map[string]any{"name": "Shared"}, &c)
	v := url.Values{"bankId": {"ZAINCASH"}, "processId": {"x-1"}, "amount": {"5000"}, "userId": {"u"}, "userName": {"u"}, "name": {"U"}}
	// The second gateway learns of the site from the stream; wait for it.
	var e envelope
	var err error
	testkit.Eventually(t, testkit.WaitFor, func() bool {
		e, err = merchant(c, "POST", b2, "/v1/transactions/deposit", v.Encode())
		require.NoError(t, err)
		return e.Status == 200
	}, "the second gateway accepts a deposit for the site")
	require.Equal(t, 200, e.Status, e.Code)
	var rec struct {
		TransactionID string `json:"transactionId"`
	}
	require.NoError(t, json.Unmarshal(e.Data, &rec))
	e, err = merchant(c, "GET", b1, "/v1/transactions/"+rec.TransactionID, "")
	require.NoError(t, err)
	assert.Equal(t, 200, e.Status, "a deposit made through --nats must be visible on the embedded gateway")
}

// natsPassword writes a NATS password to a file and returns the flags that
// give it to the gateway as user "gw", and the option that presents it
// from a test client.
func natsPassword(t *testing.T) ([]string, nats.Option) {
	t.Helper()
	pw := base64.RawURLEncoding.EncodeToString([]byte(t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)))
	file := testkit.SecretFile(t, t.TempDir(), "nats-password", pw+"\n")
	return []string{"--nats-user", "gw", "--nats-password-file", file}, nats.UserInfo("gw", pw)
}

// natsSeed writes a user nkey seed to a file and returns the flag that
// gives it to the gateway, and the option that presents it from a test
// client.
func natsSeed(t *testing.T) ([]string, nats.Option) {
	t.Helper()
	file := testkit.SecretFile(t, t.TempDir(), "seed.nk", newSeed(t))
	opt, err := nats.NkeyOptionFromSeed(file)
	require.NoError(t, err)
	return []string{"--nats-nkey-seed-file", file}, opt
}

// ledgerStream connects a plain NATS client to addr and reads the ledger
// stream's state: what someone who reaches an exposed port could do.
func ledgerStream(addr string, opts ...nats.Option) (*jetstream.StreamInfo, error) {
	nc, err := nats.Connect("nats://"+addr, opts...)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "LEDGER")
	if err != nil {
		return nil, err
	}
	return st.Info(ctx)
}

// TestNATSListen_credentials starts the gateway with its embedded server
// exposed: with credentials (from flags, the environment or files) a client
// presenting them reads the ledger stream and one without them is refused;
// with --nats-listen-insecure anyone reads it, and the gateway warns.
func TestNATSListen_credentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway subprocesses")
	}
	pwFlags, pwOpt := natsPassword(t)
	seedFlags, seedOpt := natsSeed(t)
	_, otherSeed := natsSeed(t)
	cases := []struct {
		name string
		args []string
		env  map[string]string
		good nats.Option // nil: no credentials needed
		bad  []nats.Option
	}{
		{name: "user and password file", args: pwFlags, good: pwOpt,
			bad: []nats.Option{nats.UserInfo("gw", "guess"), nats.UserInfo("other", "")}},
		{name: "user and password from env", env: map[string]string{"GATEWAY_NATS_USER": "env-user", "GATEWAY_NATS_PASSWORD": "env-password"},
			good: nats.UserInfo("env-user", "env-password"), bad: []nats.Option{nats.UserInfo("env-user", "guess")}},
		{name: "nkey seed file", args: seedFlags, good: seedOpt, bad: []nats.Option{otherSeed, nats.UserInfo("gw", "")}},
		{name: "insecure", args: []string{"--nats-listen-insecure"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			_, natsAddr, out := startOnOwnPorts(t, true, append([]string{"--data", t.TempDir()}, c.args...)...)
			if c.good == nil {
				_, err := ledgerStream(natsAddr)
				assert.NoError(t, err, "--nats-listen-insecure takes anyone")
				assert.Contains(t, out.String(), "level=WARN msg=\"--nats-listen-insecure: the embedded NATS server accepts clients without credentials")
				return
			}
			info, err := ledgerStream(natsAddr, c.good)
			require.NoError(t, err)
			assert.True(t, info.Config.DenyDelete)
			_, err = ledgerStream(natsAddr)
			assert.ErrorIs(t, err, nats.ErrAuthorization, "a client without credentials")
			for _, bad := range c.bad {
				_, err = ledgerStream(natsAddr, bad)
				assert.ErrorIs(t, err, nats.ErrAuthorization, "a client with other credentials")
			}
			assert.NotContains(t, out.String(), "level=WARN")
		})
	}
}

// TestExternalNATS_wrongCredentials: a gateway whose --nats server refuses
// its credentials stops (exit 1) and says why, rather than waiting for ever.
func TestExternalNATS_wrongCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway subprocesses")
	}
	natsFlags, _ := natsPassword(t)
	_, natsAddr, _ := startOnOwnPorts(t, true, append([]string{"--data", t.TempDir()}, natsFlags...)...)
	for _, args := range [][]string{
		{"--http", "127.0.0.1:0", "--nats", "nats://" + natsAddr, "--nats-user", "gw", "--nats-password", "guess"},
		{"callbacks", "--http", "127.0.0.1:0", "--nats", "nats://" + natsAddr},
	} {
		t.Run(args[0], func(t *testing.T) {
			cmd, out := spawn(t, args...)
			err := cmd.Wait()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "log:\n%s", out.String())
			assert.Equal(t, 1, exit.ExitCode())
			assert.Contains(t, out.String(), "Authorization Violation")
		})
	}
}

// TestGateway_lostHistoryStops: a data directory whose durable mark is past
// the ledger stream's end (block files damaged or removed) stops the
// gateway at once (exit 1), naming the lost messages, instead of serving
// the shorter history or waiting for the store for ever.
func TestGateway_lostHistoryStops(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway subprocesses")
	}
	dir := t.TempDir()
	// As left by a gateway that had 7 messages on disk: the stream the
	// next start finds is empty.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "durable-LEDGER"), fmt.Appendf(nil, "%020d\n", 7), 0o600))
	cmd, out := spawn(t, "--data", dir, "--http", testkit.FreeAddr(t))
	err := cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "log:\n%s", out.String())
	assert.Equal(t, 1, exit.ExitCode())
	assert.Contains(t, out.String(), "ends at sequence 0, but 7 was on disk")
}

// TestGateway_unusableDataFileStops: a file of the data directory the
// store cannot use (the durable mark a directory) stops the gateway with
// a clear error instead of a retry loop: waiting does not mend it.
func TestGateway_unusableDataFileStops(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway subprocesses")
	}
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "durable-LEDGER"), 0o700))
	cmd, out := spawn(t, "--data", dir, "--http", testkit.FreeAddr(t))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(testkit.WaitFor):
		t.Fatalf("the gateway is still running, retrying what waiting cannot mend; log:\n%s", out.String())
	}
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "log:\n%s", out.String())
	assert.Equal(t, 1, exit.ExitCode())
	assert.Contains(t, out.String(), "durable mark")
	assert.NotContains(t, out.String(), "waiting for the event store")
}

func TestParseByteSize(t *testing.T) {
	cases := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{in: "450MiB", want: 450 << 20},
		{in: "2GiB", want: 2 << 30},
		{in: "1TiB", want: 1 << 40},
		{in: "131072KiB", want: 128 << 20},
		{in: "536870912B", want: 512 << 20},
		{in: "536870912", want: 512 << 20},
		{in: "", wantErr: "not a size"},
		{in: "MiB", wantErr: "not a size"},
		{in: "450MB", wantErr: "not a size"},
		{in: "450 MiB", wantErr: "not a size"},
		{in: "+450MiB", wantErr: "not a size"},
		{in: "0450MiB", wantErr: "not a size"},
		{in: "-1GiB", wantErr: "not a size"},
		{in: "0", wantErr: "not a size"},
		{in: "1.5GiB", wantErr: "not a size"},
		{in: "9999999999TiB", wantErr: "not a size"},
		{in: "63MiB", wantErr: "less than 64MiB"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := parseByteSize(c.in)
			if c.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

// TestPeakRSSMiB: the peak the gateway logs when it stops covers memory it
// touched earlier.
func TestPeakRSSMiB(t *testing.T) {
	b := make([]byte, 48<<20)
	for i := range b {
		b[i] = 1
	}
	peak := peakRSSMiB()
	assert.GreaterOrEqual(t, peak, 48.0, "VmHWM after touching 48 MiB")
	assert.Equal(t, byte(1), b[len(b)-1])
}

// TestOneGatewayPerDataDir: a second gateway on a running one's --data
// stops at once with a clear error, and the first one serves on.
func TestOneGatewayPerDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateway subprocesses")
	}
	dir := t.TempDir()
	addr := testkit.FreeAddr(t)
	startGateway(t, dir, addr)
	second, out := spawn(t, "--http", testkit.FreeAddr(t), "--admin-token", testToken, "--data", dir)
	err := second.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Contains(t, out.String(), "the data directory is in use by another process")
	res, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, 200, res.StatusCode)
}
