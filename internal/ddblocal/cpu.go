package ddblocal

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// clockTicksPerSecond is the unit of the CPU times of /proc/<pid>/stat:
// USER_HZ (getconf CLK_TCK), 100 on every architecture Go runs Linux on.
const clockTicksPerSecond = 100

// CPUTime reports the CPU time (user and system) that the process of a
// server started from the jar has used so far, read from /proc on Linux.
// It reports false for a container, an endpoint from
// $ZAEL_DYNAMODB_ENDPOINT, a server that has stopped, and on other
// systems. Two readings around a run give the server's CPU for that run:
// on one machine DynamoDB Local's JVM, not the client, bounds the writes
// of one hot item, and its CPU per call is what a heavier write costs.
func (s *Server) CPUTime() (time.Duration, bool) {
	pid := s.pid.Load()
	if pid == 0 {
		return 0, false
	}
	b, err := os.ReadFile("/proc/" + strconv.FormatInt(pid, 10) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseProcStatCPU(b)
}

// parseProcStatCPU returns utime + stime of a /proc/<pid>/stat line. Its
// second field, the command in parentheses, may hold spaces: the fields
// are counted from the last ')'.
func parseProcStatCPU(b []byte) (time.Duration, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, false
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicksPerSecond, true
}
