package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The CPU a load phase cost, per request: the server's (a spawned gateway
// or refgw) and the load test's own. Both run on the same cores, so a
// throughput swings with whatever else the machine does, while the CPU a
// request takes stays put: it shows what a change saved where throughput
// rounds cannot.

// userHZ is the unit of /proc/<pid>/stat's times: USER_HZ, 100 on every
// Linux architecture the benchmark runs on (its sysconf value needs cgo).
const userHZ = 100

// readCPU returns the user and system time pid has used, from
// /proc/<pid>/stat (Linux only, as is the benchmark).
func readCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime, the 14th and 15th fields of a
// /proc/<pid>/stat line. The 2nd, the command name in parentheses, may hold
// spaces and parentheses itself, so fields are counted from its last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is the 3rd field (state): utime and stime are f[11] and f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want 13 or more", len(f))
	}
	var ticks uint64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("utime/stime %q: %w", s, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// selfCPU returns the user and system time this process has used.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// cpuWindow measures a load phase's CPU from its start.
type cpuWindow struct {
	p                *proc // nil: no server of ours to read (-url)
	server, self     time.Duration
	serverOK, selfOK bool
}

func startCPU(p *proc) cpuWindow {
	w := cpuWindow{p: p}
	if p != nil {
		v, err := readCPU(p.cmd.Process.Pid)
		w.server, w.serverOK = v, err == nil
	}
	v, err := selfCPU()
	w.self, w.selfOK = v, err == nil
	return w
}

// attach stores the phase's CPU per request in r; what cannot be read is
// left out (the load figures are still valid).
func (w cpuWindow) attach(r *LoadReport, requests int) {
	if requests <= 0 {
		return
	}
	per := func(d time.Duration) *float64 {
		v := float64(d.Microseconds()) / float64(requests)
		return &v
	}
	if w.serverOK {
		if v, err := readCPU(w.p.cmd.Process.Pid); err == nil {
			r.ServerCPUus = per(v - w.server)
		} else {
			logf("warning: cannot read the CPU time of %s: %v", w.p.name, err)
		}
	}
	if w.selfOK {
		if v, err := selfCPU(); err == nil {
			r.ClientCPUus = per(v - w.self)
		}
	}
}
