package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// proc is a server binary the load test spawned and must stop again.
type proc struct {
	name    string
	cmd     *exec.Cmd
	started time.Time     // taken just before exec, the origin of restart_to_ready
	done    chan struct{} // closed once the process has been reaped
	waitErr error         // valid after done is closed
	logPath string
	logFile *os.File
	// logFrom is where this life's output starts in logPath.
	logFrom int64
	// hwm is the highest VmHWM (MiB) read from /proc while it ran.
	hwm atomic.Uint64
}

// startProc runs bin with args, its stdout and stderr appended to logPath
// (appended so a restart keeps the first life's log beside the second).
func startProc(name, bin string, args []string, logPath string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "==== %s %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	from, _ := f.Seek(0, io.SeekCurrent)
	cmd := exec.Command(bin, args...)
	cmd.Stdout = f
	cmd.Stderr = f
	// Own process group: a Ctrl-C in the terminal reaches only the load test,
	// which then stops the server itself in an orderly way.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), logPath: logPath, logFile: f, logFrom: from}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	go p.sampleHWM()
	return p, nil
}

// sampleHWM reads the process's VmHWM every 100 ms while it runs.
func (p *proc) sampleHWM() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		p.readHWM()
		select {
		case <-p.done:
			return
		case <-t.C:
		}
	}
}

func (p *proc) readHWM() {
	if peak, _, err := readRSS(p.cmd.Process.Pid); err == nil {
		for {
			old := p.hwm.Load()
			if math.Float64frombits(old) >= peak || p.hwm.CompareAndSwap(old, math.Float64bits(peak)) {
				return
			}
		}
	}
}

// exited reports whether the process has already ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process with SIGTERM so it can flush and close its store, and
// falls back to SIGKILL after grace so a hung shutdown cannot hang the test.
func (p *proc) stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %s of SIGTERM; killed", p.name, grace)
	}
}

// lifePeakMiB is the process's peak resident set over its whole life, its
// shutdown included, once it ended (0 before): the highest of the VmHWM
// read from /proc while it ran (up to the moment of a SIGKILL) and the one
// the gateway logs as it stops (peakRSSMiB=, after its final snapshot).
// Not the kernel's ru_maxrss: a child started with fork and exec inherits
// its parent's resident set at the fork in it, and the load test holds
// hundreds of MiB by the time it restarts the gateway.
func (p *proc) lifePeakMiB() float64 {
	if !p.exited() {
		return 0
	}
	peak := math.Float64frombits(p.hwm.Load())
	if logged, ok := loggedPeak(p.logPath, p.logFrom); ok {
		peak = max(peak, logged)
	}
	return round2(peak)
}

// loggedPeak is the last peakRSSMiB= value in logPath after offset from.
func loggedPeak(logPath string, from int64) (float64, bool) {
	f, err := os.Open(logPath)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return 0, false
	}
	peak, found := 0.0, false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		_, v, ok := strings.Cut(sc.Text(), "peakRSSMiB=")
		if !ok {
			continue
		}
		v, _, _ = strings.Cut(v, " ")
		if x, err := strconv.ParseFloat(v, 64); err == nil {
			peak, found = x, true
		}
	}
	return peak, found
}

// end stops the process as -stop says: SIGTERM (a graceful shutdown, the
// gateway's final snapshot included) or SIGKILL (a crash).
func (p *proc) end(how string) error {
	if how == "term" {
		return p.stop(2 * time.Minute)
	}
	p.kill()
	return nil
}

// kill ends the process with SIGKILL, simulating a crash, and waits for it.
func (p *proc) kill() {
	if p.exited() {
		return
	}
	p.readHWM() // nothing happens after the kill
	_ = p.cmd.Process.Kill()
	<-p.done
}

// waitReady polls url until it answers 200, the process dies, ctx ends or
// timeout passes. It returns the time from process start to the first 200.
// It polls every 10 ms so restart_to_ready is measured with that resolution.
func waitReady(ctx context.Context, p *proc, url string, timeout time.Duration) (time.Duration, error) {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(p.started), nil
			}
			last = "status " + strconv.Itoa(resp.StatusCode)
		} else {
			last = err.Error()
		}
		if p.exited() {
			return 0, fmt.Errorf("%s exited before %s answered 200 (%v); log: %s", p.name, url, p.waitErr, p.logPath)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s not ready after %s (%s: %s); log: %s", p.name, timeout, url, last, p.logPath)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// freeAddr finds a free loopback TCP port by binding port 0 and releasing it.
// Another process could grab it before the server binds; on a test machine
// that race is rare enough, and the server's failure to bind shows in its log.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// readRSS returns the peak (VmHWM) and current (VmRSS) resident set size of
// pid in MiB, read from /proc/<pid>/status (Linux only, as is the benchmark).
func readRSS(pid int) (peak, cur float64, err error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	return parseRSS(f)
}

// parseRSS extracts VmHWM and VmRSS (reported in kB) from a /proc status file.
func parseRSS(r io.Reader) (peak, cur float64, err error) {
	sc := bufio.NewScanner(r)
	found := 0
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmHWM" && k != "VmRSS") {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		kb, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parse %s: %w", k, err)
		}
		if k == "VmHWM" {
			peak = round2(kb / 1024)
		} else {
			cur = round2(kb / 1024)
		}
		found++
	}
	if found < 2 {
		return 0, 0, fmt.Errorf("VmHWM/VmRSS not found")
	}
	return peak, cur, sc.Err()
}

// attachRSS stores the process's memory figures in the report; failure to
// read them is only a warning, because the load figures are still valid.
func attachRSS(r *LoadReport, p *proc) {
	peak, cur, err := readRSS(p.cmd.Process.Pid)
	if err != nil {
		logf("warning: cannot read RSS of %s: %v", p.name, err)
		return
	}
	r.RSSPeakMiB, r.RSSMiB = &peak, &cur
}
