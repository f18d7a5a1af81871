//go:build !linux

package ddblocal

import "os/exec"

// setDeathSignal does nothing outside Linux: there a test binary that dies
// without running Close leaves its DynamoDB Local running.
func setDeathSignal(*exec.Cmd) {}
