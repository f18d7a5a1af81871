package infra

import (
	"testing"
	"time"
)

func TestSmoke(t *testing.T) {
	cfg := motoConfig(t)
	ctx := testContext(t)
	var events []Event
	d := NewDeployer(cfg, func(o *DeployerOptions) {
		o.PollInterval = 50 * time.Millisecond
		o.Progress = func(e Event) { events = append(events, e) }
	})
	name := stackName(t)
	st, err := d.Deploy(ctx, name, func() StackOptions { o := DefaultStackOptions(); o.CreateIAMRoles = true; return o }(), testZip(t, "echo 1"))
	for _, e := range events {
		t.Logf("%+v", e)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", st)
}
