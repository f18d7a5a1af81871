package redisserver

import (
	"strconv"
	"strings"
)

// CommandStat returns the calls and total microseconds of cmd (lower case,
// e.g. "fcall") in the reply of INFO commandstats; zero for a command the
// reply does not list.
func CommandStat(info, cmd string) (calls int64, usec float64) {
	for kv := range strings.SplitSeq(InfoField(info, "cmdstat_"+cmd), ",") {
		k, val, _ := strings.Cut(kv, "=")
		switch k {
		case "calls":
			calls, _ = strconv.ParseInt(val, 10, 64)
		case "usec":
			usec, _ = strconv.ParseFloat(val, 64)
		}
	}
	return calls, usec
}

// InfoField returns the value of key in an INFO reply.
func InfoField(info, key string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+":"); ok {
			return v
		}
	}
	return ""
}
