// Package readmetest runs the shell examples of the project's READMEs, as
// a reader would, against a fresh quick-start gateway (readme_test.go).
// This file finds the examples.
package readmetest

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Mode is what the README test does with a block.
type Mode int

const (
	// Run: the block runs against the running quick-start gateway.
	Run Mode = iota
	// AfterStop: the block runs once the gateway has stopped (offline
	// tools that refuse a running gateway's data directory).
	AfterStop
	// Skip: the block is not run, for the reason its annotation gives.
	Skip
)

// The annotations, each an HTML comment on the line right before a block's
// fence (invisible where the README is rendered).
const (
	skipPrefix    = "<!-- not run by the README test: "
	afterStopNote = "<!-- run by the README test after the gateway stops -->"
	commentEnd    = " -->"
)

// Block is one ```sh example.
type Block struct {
	File   string
	Line   int // of the opening fence, 1-based
	Text   string
	Mode   Mode
	Reason string // why a Skip block is not run
}

// Where names the block for a failure message.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// Parse returns the ```sh blocks of a Markdown file, in order. A block is
// run unless the line before its fence says otherwise; an annotation that
// names the README test but is neither form, a skip without a reason, or
// an unterminated block is an error, so that a typo cannot quietly take
// an example out of the test.
func Parse(file string, r io.Reader) ([]Block, error) {
	var out []Block
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var prev string
	var cur *Block
	var body []string
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if cur != nil {
			if strings.TrimSpace(line) == "```" {
				cur.Text = strings.Join(body, "\n") + "\n"
				out = append(out, *cur)
				cur, body = nil, nil
			} else {
				body = append(body, line)
			}
			prev = line
			continue
		}
		if strings.HasPrefix(line, "```") {
			lang := strings.TrimSpace(strings.TrimPrefix(line, "```"))
			if lang == "sh" {
				b := Block{File: file, Line: n}
				if err := annotate(&b, prev); err != nil {
					return nil, err
				}
				cur = &b
			} else {
				// Another language's block: skip to its end.
				for sc.Scan() {
					n++
					if strings.TrimSpace(sc.Text()) == "```" {
						break
					}
				}
			}
			prev = ""
			continue
		}
		prev = line
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the sh block is not closed", file, cur.Line)
	}
	return out, nil
}

// annotate sets b's mode from the line before its fence.
func annotate(b *Block, prev string) error {
	prev = strings.TrimSpace(prev)
	switch {
	case prev == afterStopNote:
		b.Mode = AfterStop
	case strings.HasPrefix(prev, skipPrefix) && strings.HasSuffix(prev, commentEnd):
		b.Mode = Skip
		b.Reason = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(prev, skipPrefix), commentEnd))
		if b.Reason == "" {
			return fmt.Errorf("%s: a block the README test does not run must say why", b.Where())
		}
	case strings.HasPrefix(prev, "<!--") && strings.Contains(prev, "README test"):
		return fmt.Errorf("%s: unknown annotation %q (want %q or %q)", b.Where(), prev, skipPrefix+"REASON"+commentEnd, afterStopNote)
	}
	return nil
}
