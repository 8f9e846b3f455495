package jsstore

// What the start of the embedded server waits for, and saying so while it
// takes its time.

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// startReport is how often a start that takes its time says what it
// waits for.
const startReport = 5 * time.Second

// startWatch follows a start: it waits for the server to accept
// connections, and logs every startReport what the start waits for.
type startWatch struct {
	c       ServerConfig
	timeout time.Duration
	began   time.Time
	done    chan struct{}
	stopped chan struct{}

	mu sync.Mutex
	// srv is the server once the block files are checked (nil before).
	srv *server.Server
	// since is when srv started.
	since time.Time
	// said is what the server said last while starting (see startLog).
	said *startLog
	// storeBytes is the size of Dir's JetStream files (-1: not measured
	// yet; measured by the first report, as only a slow start needs it).
	storeBytes int64
}

func newStartWatch(c ServerConfig) *startWatch {
	w := &startWatch{c: c, timeout: c.StartTimeout, began: time.Now(), done: make(chan struct{}),
		stopped: make(chan struct{}), storeBytes: -1}
	if w.timeout <= 0 {
		w.timeout = DefaultStartTimeout
	}
	if c.Logger == nil {
		close(w.stopped)
		return w
	}
	go func() {
		defer close(w.stopped)
		t := time.NewTicker(startReport)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-t.C:
				w.report()
			}
		}
	}()
	return w
}

// serving records the server started once the block files are checked,
// and has it tell its startLog what it does.
func (w *startWatch) serving(s *server.Server) {
	l := &startLog{fatal: make(chan string, 1)}
	s.SetLoggerV2(l, false, false, false)
	w.mu.Lock()
	w.srv, w.since, w.said = s, time.Now(), l
	w.mu.Unlock()
}

// stop ends the reports.
func (w *startWatch) stop() {
	close(w.done)
	<-w.stopped
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.said != nil {
		w.said.quiet()
	}
}

// readyPoll is how long one readiness check of the server waits: a fatal
// error of the server is noticed within it.
const readyPoll = 100 * time.Millisecond

// waitReady waits until the server accepts connections, says it never
// will (a port in use, a store directory it cannot use) or the timeout
// has passed since it started.
func (w *startWatch) waitReady() error {
	w.mu.Lock()
	s, l, deadline := w.srv, w.said, w.since.Add(w.timeout)
	w.mu.Unlock()
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w: waited %s for %s", ErrStartTimeout, w.timeout, w.waitingFor())
		}
		if s.ReadyForConnections(min(readyPoll, left)) {
			return nil
		}
		select {
		case why := <-l.fatal:
			return fmt.Errorf("embedded nats: %s", why)
		default:
		}
	}
}

// waitingFor says what the start waits for now.
func (w *startWatch) waitingFor() string {
	w.mu.Lock()
	s, l := w.srv, w.said
	if w.storeBytes < 0 {
		w.storeBytes = dirBytes(filepath.Join(w.c.Dir, "jetstream"))
	}
	n := w.storeBytes
	w.mu.Unlock()
	var what string
	switch {
	case s == nil:
		what = fmt.Sprintf("the check of the message blocks written in %s since the last start (%d bytes of JetStream files)", w.c.Dir, n)
	case !s.JetStreamEnabled():
		what = "the server to start"
	default:
		what = fmt.Sprintf("the server to recover its JetStream streams from their %d bytes of files in %s", n, w.c.Dir)
		if w.c.Listen != "" {
			what += " and listen on " + w.c.Listen
		}
	}
	if said := l.last(); said != "" {
		what += " (it last said: " + said + ")"
	}
	return what
}

// report logs what the start waits for.
func (w *startWatch) report() {
	what := w.waitingFor()
	w.mu.Lock()
	n, s, since := w.storeBytes, w.srv, w.since
	w.mu.Unlock()
	args := []any{"waitingFor", what, "storeBytes", n, "elapsed", time.Since(w.began).Round(time.Second)}
	if s != nil {
		args = append(args, "serverElapsed", time.Since(since).Round(time.Second), "timeout", w.timeout)
	}
	w.c.Logger.Info("embedded NATS server not ready yet", args...)
}

// dirBytes is the size of the files under dir (what it can read of them).
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// startLog is the embedded server's logger. The server otherwise logs
// nothing (NoLog): what it says while it starts tells what a slow start
// is doing, and a fatal error (a port in use, JetStream refusing its
// directory) why it will never be ready, which the server, with no
// logger to exit through, would otherwise only show by never becoming so.
// Once the start is over it drops everything, as before.
type startLog struct {
	mu    sync.Mutex
	said  string
	over  bool
	fatal chan string
}

func (l *startLog) note(format string, v []any) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.over {
		return ""
	}
	l.said = strings.TrimSpace(fmt.Sprintf(format, v...))
	return l.said
}

func (l *startLog) last() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.said
}

func (l *startLog) quiet() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.over = true
}

func (l *startLog) Noticef(format string, v ...any) { l.note(format, v) }
func (l *startLog) Warnf(format string, v ...any)   { l.note(format, v) }
func (l *startLog) Errorf(format string, v ...any)  { l.note(format, v) }
func (l *startLog) Debugf(string, ...any)           {}
func (l *startLog) Tracef(string, ...any)           {}

func (l *startLog) Fatalf(format string, v ...any) {
	if why := l.note(format, v); why != "" {
		select {
		case l.fatal <- why:
		default:
		}
	}
}
