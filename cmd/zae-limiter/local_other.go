//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// detach does nothing here: `local up` runs its processes in the
// foreground's process group.
func detach(*exec.Cmd) {}

// processAlive reports whether pid is a live process (on Windows,
// FindProcess opens the process and fails when there is none).
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}

// terminate stops pid (there is no gentler signal here).
func terminate(pid int) error { return kill(pid) }

// kill stops pid at once.
func kill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
