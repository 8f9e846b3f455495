package main

// ledgerctl projections: the read models' store, reported on and rebuilt
// from the stream (docs/ARCHITECTURE.md "Read models").

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/iqdgateway/gateway/audit"
	"github.com/iqdgateway/gateway/events"
	"github.com/iqdgateway/gateway/projections"
)

const projectionsUsage = `usage:
  ledgerctl projections status  [--json] [--projections-dir DIR] (--data DIR | --nats URL)
  ledgerctl projections rebuild [--model NAME] [--projections-dir DIR] (--data DIR | --nats URL)

status prints each read model, its format version (this build's and the stored one), its
checkpoint and the stream's last sequence. rebuild drops the model (every model without
--model) and builds it again from the stream. The read models' store is --projections-dir,
by default <--data>/projections; the gateway using it must be stopped (the store is locked
while open).
`

// runProjections runs 'ledgerctl projections' over models (the build's
// projections.Models(); tests give their own).
func runProjections(ctx context.Context, args []string, stdout, stderr io.Writer, models []projections.Model) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, projectionsUsage)
		return exitUsage
	}
	switch args[0] {
	case "status":
		return runProjectionsStatus(ctx, args[1:], stdout, stderr, models)
	case "rebuild":
		return runProjectionsRebuild(ctx, args[1:], stdout, stderr, models)
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, projectionsUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "ledgerctl projections: unknown command %q\n\n%s", args[0], projectionsUsage)
	return exitUsage
}

// projectionsSource is a source of the stream and the read models' store.
type projectionsSource struct {
	source
	dir string
}

func (p *projectionsSource) register(fs *flag.FlagSet) {
	fs.StringVar(&p.dir, "projections-dir", "", "the read models' store (default: <--data>/projections; required with --nats)")
}

// validate checks the flags and settles the store's directory.
func (p *projectionsSource) validate() error {
	if err := p.source.validate(); err != nil {
		return err
	}
	if p.dir == "" {
		if p.data == "" {
			return errors.New("--projections-dir is required with --nats")
		}
		p.dir = filepath.Join(p.data, "projections")
	}
	return nil
}

// stream opens the ledger stream; offline it is read from the block files
// first, as the audit reads it.
func (p *projectionsSource) stream(ctx context.Context, stderr io.Writer) (events.Store, func(), error) {
	st, closeStore, err := p.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	if p.data != "" {
		return &filesFirst{Store: st, dir: p.data, warn: stderr}, closeStore, nil
	}
	return st, closeStore, nil
}

func runProjectionsStatus(ctx context.Context, args []string, stdout, stderr io.Writer, models []projections.Model) int {
	fs := newFlags("projections status", stderr)
	var src projectionsSource
	src.source.register(fs)
	src.register(fs)
	asJSON := fs.Bool("json", false, "print the status as one JSON document")
	if code, stop := parse(fs, args); stop {
		return code
	}
	if err := src.validate(); err != nil {
		return usageErr(stderr, fs, err)
	}
	st, closeStore, err := src.stream(ctx, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl projections status: %v\n", err)
		return exitError
	}
	defer closeStore()
	last, err := st.LastSeq(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl projections status: %v\n", err)
		return exitError
	}
	ms, err := projections.ReadStatus(src.dir, slog.New(slog.NewTextHandler(stderr, nil)), models...)
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl projections status: %v\n", err)
		return exitError
	}
	rep := struct {
		Dir     string                    `json:"dir"`
		LastSeq uint64                    `json:"lastSeq"`
		Models  []projections.ModelStatus `json:"models"`
	}{src.dir, last, ms}
	text := func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "read models in %s; stream last sequence %d\n", src.dir, last)
		if len(ms) == 0 {
			fmt.Fprintln(tw, "this build has no read models")
		} else {
			fmt.Fprintln(tw, "MODEL\tVERSION\tSTORED\tCHECKPOINT\tBEHIND")
		}
		for _, m := range ms {
			note := ""
			if m.Stored != m.Version {
				note = "  (rebuilt from the stream when next opened)"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d%s\n", m.Name, m.Version, m.Stored, m.Checkpoint, last-min(last, m.Checkpoint), note)
		}
		return tw.Flush()
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = text(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl projections status: %v\n", err)
		return exitError
	}
	return exitOK
}

func runProjectionsRebuild(ctx context.Context, args []string, stdout, stderr io.Writer, models []projections.Model) int {
	fs := newFlags("projections rebuild", stderr)
	var src projectionsSource
	src.source.register(fs)
	src.register(fs)
	model := fs.String("model", "", "rebuild only this model (default: every model)")
	if code, stop := parse(fs, args); stop {
		return code
	}
	if err := src.validate(); err != nil {
		return usageErr(stderr, fs, err)
	}
	chosen := models
	if *model != "" {
		i := slices.IndexFunc(models, func(m projections.Model) bool { return m.Name() == *model })
		if i < 0 {
			names := make([]string, 0, len(models))
			for _, m := range models {
				names = append(names, m.Name())
			}
			return usageErr(stderr, fs, fmt.Errorf("--model: no read model %q (this build has %q)", *model, names))
		}
		chosen = models[i : i+1]
	}
	if len(chosen) == 0 {
		fmt.Fprintln(stdout, "this build has no read models: nothing to rebuild")
		return exitOK
	}
	st, closeStore, err := src.stream(ctx, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl projections rebuild: %v\n", err)
		return exitError
	}
	defer closeStore()
	// Only the chosen models are opened: the others keep their keys and
	// checkpoints untouched.
	log := slog.New(slog.NewTextHandler(stderr, nil))
	db, err := projections.Open(src.dir, log, chosen...)
	if err != nil {
		fmt.Fprintf(stderr, "ledgerctl projections rebuild: %v\n", err)
		return exitError
	}
	defer db.Close()
	start := time.Now()
	for _, m := range chosen {
		if err := db.Drop(m.Name()); err != nil {
			fmt.Fprintf(stderr, "ledgerctl projections rebuild: %v\n", err)
			return exitError
		}
	}
	if err := db.CatchUp(ctx, st); err != nil {
		fmt.Fprintf(stderr, "ledgerctl projections rebuild: %v (the models stand at their checkpoints; the gateway goes on from there)\n", err)
		return exitError
	}
	for _, m := range chosen {
		fmt.Fprintf(stdout, "rebuilt %s (version %d) to stream sequence %d\n", m.Name(), m.Version(), db.Checkpoint(m.Name()))
	}
	fmt.Fprintf(stdout, "in %s\n", time.Since(start).Round(time.Millisecond))
	return exitOK
}

// readModelsCheck compares every read model stored in dir with its own
// replay of the stream (projections.Verify), as the audit's read-models
// check.
func readModelsCheck(ctx context.Context, dir string, st events.Store, models []projections.Model) (audit.Check, error) {
	checks, err := projections.Verify(ctx, dir, st, slog.New(slog.DiscardHandler), models...)
	if err != nil {
		return audit.Check{}, err
	}
	c := audit.Check{Name: audit.CheckReadModels, Status: audit.Pass}
	var said []string
	for _, m := range checks {
		switch {
		case m.Skipped != "":
			said = append(said, fmt.Sprintf("%s not compared: %s", m.Name, m.Skipped))
		default:
			said = append(said, fmt.Sprintf("%s: %d keys up to %d", m.Name, m.Keys, m.Checkpoint))
		}
		c.Count += m.Differences
		for _, f := range m.First {
			c.Problems = append(c.Problems, audit.Problem{Message: m.Name + ": " + f})
		}
	}
	if c.Count > 0 {
		c.Status = audit.Fail
	}
	if len(said) == 0 {
		said = append(said, "no read models in this build")
	}
	c.Detail = strings.Join(said, "; ")
	return c, nil
}
