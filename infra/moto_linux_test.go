package infra

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill moto when the test binary dies
// without stopping it (a go test timeout, a signal).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
