package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryLimitFlag registers --memory-limit: a soft limit of the Go
// runtime's memory (debug.SetMemoryLimit, Go's GOMEMLIMIT), for a process
// that must stay within a budget. The gateway's heap is mostly ledger
// state, and the embedded server's block caches are only dropped at a
// collection: without a limit they fill whatever the GOGC headroom leaves
// (BENCHMARKS.md "A million transactions over 1,000 sites").
func memoryLimitFlag(fs *flag.FlagSet, v *string) {
	fs.StringVar(v, "memory-limit", env("GATEWAY_MEMORY_LIMIT", ""),
		"soft limit of the process's memory, e.g. 450MiB or 2GiB: the garbage collector runs more often near it;\n"+
			"empty: none (GOMEMLIMIT is honoured too) [GATEWAY_MEMORY_LIMIT]")
}

// checkMemoryLimit refuses a --memory-limit that is no size.
func checkMemoryLimit(s string) error {
	if s == "" {
		return nil
	}
	if _, err := parseByteSize(s); err != nil {
		return fmt.Errorf("--memory-limit: %w", err)
	}
	return nil
}

// setMemoryLimit sets the limit s names (checked); empty leaves the
// runtime's.
func setMemoryLimit(s string) {
	if n, err := parseByteSize(s); err == nil {
		debug.SetMemoryLimit(n)
	}
}

// parseByteSize reads a size the way GOMEMLIMIT does: a whole number of
// bytes with an optional B, KiB, MiB, GiB or TiB suffix.
func parseByteSize(s string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	num, shift := s, uint(0)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			num, shift = rest, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || num != strconv.FormatInt(n, 10) || n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("%q is not a size: a whole number of bytes, optionally with B, KiB, MiB, GiB or TiB (e.g. 450MiB)", s)
	}
	if n<<shift < 64<<20 {
		return 0, fmt.Errorf("%q is less than 64MiB, too little for the gateway", s)
	}
	return n << shift, nil
}

// peakRSSMiB is the process's peak resident set so far (VmHWM, Linux; 0
// elsewhere), logged when it stops: the whole life's peak, shutdown
// included. The kernel's ru_maxrss, which a parent reads after the exit,
// cannot serve: it starts from the parent's own resident set at the fork.
func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				return 0
			}
			kb, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return 0
			}
			return math.Round(kb/1024*10) / 10
		}
	}
	return 0
}
