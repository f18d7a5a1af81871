//go:build unix

package redisserver

import (
	"errors"
	"syscall"
)

// Pause stops the process without ending it (SIGSTOP), as a hung or
// swapped-out server: connections stay open and requests get no answer
// until [Server.Resume]. A paused server can still be killed.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume lets a paused process run again (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return errors.New("redisserver: the server is not running")
	}
	return s.proc.Signal(sig)
}
