//go:build !linux

package motoserver

import "os/exec"

// setDeathSignal does nothing outside Linux: there a test binary that dies
// without running Close leaves its moto server running.
func setDeathSignal(*exec.Cmd) {}
