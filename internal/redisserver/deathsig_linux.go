package redisserver

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the child when the thread that started
// it dies, so a test binary killed by a timeout leaves no redis-server
// behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
