package readmetest

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/iqdgateway/gateway/internal/testkit"
)

// root is the repository, from this package's directory.
const root = "../.."

// quickStart is the command the README's first block starts with: the
// test starts its gateway with exactly this.
const quickStart = "go run ./cmd/gateway --demo"

// TestREADMEExamples runs every shell example of every README in order, as
// a reader would paste them, against a fresh quick-start gateway: in a
// directory that looks like a checkout (so ./data, bin/ and the README's
// relative paths are the reader's), in one shell session whose variables
// carry from block to block, starting from the export line --demo prints.
// A block fails on any failing command (set -e, pipefail) and on any HTTP
// error status: curl runs with --fail-with-body, so that "curl -s" cannot
// print an error envelope and pass. The port is the one thing not as
// written: the gateway listens on a free one (GATEWAY_HTTP), and the
// examples reach it through $G.
func TestREADMEExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the README's examples against a gateway")
	}
	if out, err := exec.Command(filepath.Join(root, ".ci/setup-tools")).CombinedOutput(); err != nil {
		t.Fatalf("installing curl, openssl and jq (.ci/setup-tools): %v\n%s", err, out)
	}
	blocks := readmeBlocks(t)
	first := blocks[0]
	require.Equal(t, "README.md", first.File, "the README's own examples come first")
	require.Equal(t, quickStart, strings.TrimSpace(strings.SplitN(strings.SplitN(first.Text, "\n", 2)[0], "#", 2)[0]),
		"the README's first command is the quick start this test runs")
	checkWorkedSignature(t)

	work := checkoutLike(t)
	sh := newShell(t, work)
	gw := startQuickStart(t, work, sh)
	sh.source(gw.exports)

	ran := 0
	for _, b := range blocks {
		if b.Mode == Run {
			sh.run(t, b)
			ran++
		}
	}
	gw.stop(t)
	for _, b := range blocks {
		if b.Mode == AfterStop {
			sh.run(t, b)
			ran++
		}
	}
	for _, b := range blocks {
		if b.Mode == Skip {
			t.Logf("%s not run: %s", b.Where(), b.Reason)
		}
	}
	t.Logf("%d of %d examples ran", ran, len(blocks))
}

// readmeBlocks parses README.md and then every other README.md of the
// repository (sorted), outside build output and data.
func readmeBlocks(t *testing.T) []Block {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "build" || d.Name() == "data" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "README.md" {
			files = append(files, p)
		}
		return nil
	})
	require.NoError(t, err)
	var out []Block
	for _, f := range files { // WalkDir is lexical: ../../README.md first
		rel, err := filepath.Rel(root, f)
		require.NoError(t, err)
		fh, err := os.Open(f)
		require.NoError(t, err)
		bs, err := Parse(rel, fh)
		fh.Close()
		require.NoError(t, err)
		out = append(out, bs...)
	}
	require.NotEmpty(t, out)
	return out
}

// checkWorkedSignature holds the worked signing example of the README and
// of docs/merchant-api.md to its claim: the signature it shows for the
// secret demo-secret is that body's.
func checkWorkedSignature(t *testing.T) {
	t.Helper()
	for _, f := range []string{"README.md", "docs/merchant-api.md"} {
		text, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		m := regexp.MustCompile(`(?m)^BODY='([^']*)'\n(?:.*\n)?# with the secret demo-secret, SIGN would be (\S+)$`).FindSubmatch(text)
		require.NotNil(t, m, "%s: the worked example's BODY and the SIGN it claims", f)
		mac := hmac.New(sha256.New, []byte("demo-secret"))
		mac.Write(m[1])
		require.Equal(t, base64.StdEncoding.EncodeToString(mac.Sum(nil)), string(m[2]), "%s: the worked example's signature", f)
	}
}

// checkoutLike makes a directory that holds the repository's files through
// symbolic links, without its data, binaries or build output, so that the
// examples' ./data and bin/ are fresh and the checkout is never written.
func checkoutLike(t *testing.T) string {
	t.Helper()
	work := t.TempDir()
	abs, err := filepath.Abs(root)
	require.NoError(t, err)
	entries, err := os.ReadDir(abs)
	require.NoError(t, err)
	for _, e := range entries {
		switch e.Name() {
		case ".git", "data", "bin", "build", ".env":
			continue
		}
		require.NoError(t, os.Symlink(filepath.Join(abs, e.Name()), filepath.Join(work, e.Name())))
	}
	return work
}

// shell is one reader's shell session: the exported variables of each
// block are kept for the next.
type shell struct {
	work, state, shims, tmp string
}

// newShell prepares the session: a state file and a curl that fails on an
// HTTP error status.
func newShell(t *testing.T, work string) *shell {
	t.Helper()
	dir := t.TempDir()
	curl, err := exec.LookPath("curl")
	require.NoError(t, err)
	shims := filepath.Join(dir, "shims")
	require.NoError(t, os.Mkdir(shims, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(shims, "curl"),
		[]byte("#!/bin/sh\nexec "+curl+" --fail-with-body --show-error \"$@\"\n"), 0o755))
	tmp := filepath.Join(dir, "tmp") // the examples' mktemp, removed with the test
	require.NoError(t, os.Mkdir(tmp, 0o755))
	s := &shell{work: work, state: filepath.Join(dir, "state.sh"), shims: shims, tmp: tmp}
	require.NoError(t, os.WriteFile(s.state, nil, 0o600))
	return s
}

// source adds lines to the session's state, as a reader pastes them.
func (s *shell) source(lines string) {
	f, err := os.OpenFile(s.state, os.O_APPEND|os.O_WRONLY, 0o600)
	if err == nil {
		_, _ = f.WriteString(lines + "\n")
		_ = f.Close()
	}
}

// run runs one block in the session and fails the test, naming the block,
// when it fails.
func (s *shell) run(t *testing.T, b Block) {
	t.Helper()
	script := "set -a\n. \"$README_STATE\"\nset -e -o pipefail\ncd \"$README_WORK\"\n" + b.Text +
		"\nexport -p > \"$README_STATE.next\"\n"
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "README_STATE="+s.state, "README_WORK="+s.work, "TMPDIR="+s.tmp,
		"PATH="+s.shims+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	if err != nil {
		t.Fatalf("%s failed (%v):\n--- block\n%s--- output\n%s", b.Where(), err, b.Text, out.String())
	}
	require.NoError(t, os.Rename(s.state+".next", s.state))
	t.Logf("%s ran in %s", b.Where(), time.Since(start).Round(time.Millisecond))
}

// gateway is the quick-start gateway, started as the README says.
type gateway struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed once go run has exited
	exports string        // the export line --demo printed
	once    sync.Once
}

// startQuickStart runs the quick start in work, on a free port and with a
// pinned operator token (as the README's Operator API section pins one),
// and waits until it is ready and has printed its export line.
func startQuickStart(t *testing.T, work string, sh *shell) *gateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	tok := make([]byte, 33)
	_, _ = rand.Read(tok)
	token := base64.StdEncoding.EncodeToString(tok)

	out := &testkit.Buffer{}
	cmd := exec.Command("bash", "-c", "exec "+quickStart)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GATEWAY_HTTP="+addr, "GATEWAY_ADMIN_TOKEN="+token, "GATEWAY_LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group: go run's child, the gateway, is stopped with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	g := &gateway{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(g.exited) }()
	t.Cleanup(func() {
		g.stop(t)
		if t.Failed() {
			t.Logf("gateway output:\n%s", out.String())
		}
	})
	sh.source("export GATEWAY_ADMIN_TOKEN='" + token + "'")

	deadline := time.Now().Add(3 * time.Minute) // go run builds it first
	for {
		if m := regexp.MustCompile(`(?m)^\s*(export G=.*)$`).FindStringSubmatch(out.String()); m != nil {
			g.exports = m[1]
			break
		}
		select {
		case <-g.exited:
			t.Fatalf("the quick-start gateway exited before printing its export line:\n%s", out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the quick-start gateway printed no export line:\n%s", out.String())
		}
	}
	res, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
	require.Contains(t, g.exports, `TOKEN="$GATEWAY_ADMIN_TOKEN"`, "a pinned token is named by its variable")
	return g
}

// stop ends the gateway as Ctrl-C would (SIGTERM to its process group) and
// waits until every process of the group is gone, so that its data
// directory is free.
func (g *gateway) stop(t *testing.T) {
	g.once.Do(func() {
		pgid := g.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
				<-g.exited
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-g.exited
		t.Errorf("the quick-start gateway did not stop within 60 s of SIGTERM")
	})
}
