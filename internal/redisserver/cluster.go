package redisserver

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Cluster is a Redis Cluster of masters only, each a [Server] on a loopback
// port. The zero value is not usable; call [StartCluster].
type Cluster struct {
	nodes []*Server
}

// Addrs returns the addresses of the masters.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr()
	}
	return out
}

// Nodes returns the masters.
func (c *Cluster) Nodes() []*Server { return c.nodes }

// Close stops every master.
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}

// StartCluster starts masters cluster-enabled servers, joins them with
// `redis-cli --cluster create` (the 16384 slots spread over them, no
// replicas) and waits until every node reports the cluster ok.
func StartCluster(ctx context.Context, masters int) (*Cluster, error) {
	if _, err := exec.LookPath(CLIBinary); err != nil {
		return nil, fmt.Errorf("%w: %s not found (%s)", ErrUnavailable, CLIBinary, InstallHint)
	}
	c := &Cluster{}
	for range masters {
		s, err := start(ctx, true)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.CommandContext(ctx, CLIBinary, args...).CombinedOutput()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("redis-cli --cluster create: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if err := c.waitOK(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// waitOK polls CLUSTER INFO on every node until each reports
// cluster_state:ok and knows every node.
func (c *Cluster) waitOK(ctx context.Context) error {
	want := fmt.Sprintf("cluster_known_nodes:%d", len(c.nodes))
	for {
		ok := true
		var last string
		for _, n := range c.nodes {
			info, err := exec.CommandContext(ctx, CLIBinary, "-h", "127.0.0.1", "-p", fmt.Sprint(n.Port()), "cluster", "info").Output()
			last = string(info)
			if err != nil || !strings.Contains(last, "cluster_state:ok") || !strings.Contains(last, want) {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not ok: %w: %s", ctx.Err(), strings.TrimSpace(last))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
