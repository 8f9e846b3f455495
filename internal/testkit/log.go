package testkit

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Buffer is a bytes.Buffer safe for concurrent writers: a logger's output,
// or a child process's stdout and stderr.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Log captures what the code under test logs, in slog's text format, and
// fails the test when it ends if an ERROR line was logged that the test did
// not declare with ExpectErrors: an error the code logs and the test does
// not look at (a message not applied, a panic recovered) is a failure
// nobody would otherwise notice.
type Log struct {
	// Logger writes into the capture: hand it to the code under test.
	*slog.Logger
	buf Buffer

	mu       sync.Mutex
	expected []string
	any      bool
}

// NewLog returns a capture of records at level and above. Its check runs
// among the test's cleanups in reverse order of registration: make the Log
// before starting what logs into it, so that the check runs after that has
// stopped.
func NewLog(t testing.TB, level slog.Leveler) *Log {
	l := &Log{}
	l.Logger = slog.New(slog.NewTextHandler(&l.buf, &slog.HandlerOptions{Level: level}))
	t.Cleanup(func() {
		for _, line := range l.unexpected() {
			t.Errorf("an unexpected error was logged:\n%s", line)
		}
	})
	return l
}

// ExpectErrors declares ERROR lines the test provokes on purpose: a line
// holding any of subs does not fail the test; every other ERROR line still
// does.
func (l *Log) ExpectErrors(subs ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expected = append(l.expected, subs...)
}

// AllowErrors accepts every ERROR line: for tests whose logger used to
// discard everything, until they declare what they provoke.
func (l *Log) AllowErrors() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.any = true
}

// String returns everything logged so far.
func (l *Log) String() string { return l.buf.String() }

// unexpected returns the ERROR lines no expectation covers.
func (l *Log) unexpected() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.any {
		return nil
	}
	var out []string
	for line := range strings.SplitSeq(l.buf.String(), "\n") {
		if strings.Contains(line, "level=ERROR") &&
			!slices.ContainsFunc(l.expected, func(s string) bool { return strings.Contains(line, s) }) {
			out = append(out, line)
		}
	}
	return out
}
