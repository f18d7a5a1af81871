//go:build !linux

package redisserver

import "os/exec"

// setDeathSignal does nothing outside Linux: there a test binary that dies
// without running Close leaves its redis-server running.
func setDeathSignal(*exec.Cmd) {}
