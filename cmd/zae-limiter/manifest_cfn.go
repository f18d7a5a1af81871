package main

// `limits cfn-template`: a CloudFormation stack holding a limits manifest as
// a Custom::ZaeLimiterLimits resource, served by the provisioner Lambda of
// the stack --name (deployed with --enable-provisioner).

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/infra/provisioner"
	"github.com/zaelimiter/limiter/store"
)

// provisionerLimits converts validated limits into the resource's form.
func provisionerLimits(ls []limiter.Limit) provisioner.Limits {
	out := provisioner.Limits{}
	for _, l := range ls {
		if store.Limit(l).IsInFlight() {
			out[l.Name] = provisioner.Limit{Capacity: provisioner.Number(l.Capacity), InFlight: true}
			continue
		}
		d := provisioner.Limit{
			Capacity:     provisioner.Number(l.Capacity),
			RefillAmount: provisioner.Number(l.RefillAmount),
			RefillPeriod: provisioner.Number(l.RefillPeriod / time.Second),
		}
		if store.Limit(l).IsCalendar() {
			d.Calendar, d.Timezone = l.Calendar.String(), store.Limit(l).LocationName()
		}
		d.Prepaid = provisioner.Bool(store.Limit(l).IsPrepaid())
		out[l.Name] = d
	}
	return out
}

// manifestProperties converts a manifest into the resource's properties.
func manifestProperties(table string, m *manifest) provisioner.Properties {
	p := provisioner.Properties{TableName: table, Namespace: m.namespace}
	if s := m.system; s != nil {
		p.System = &provisioner.System{OnUnavailable: string(s.onUnavailable)}
		if len(s.limits) > 0 {
			p.System.Limits = provisionerLimits(s.limits)
		}
	}
	if len(m.resources) > 0 {
		p.Resources = map[string]provisioner.Resource{}
		for res, ls := range m.resources {
			p.Resources[res] = provisioner.Resource{Limits: provisionerLimits(ls)}
		}
	}
	if len(m.entities) > 0 {
		p.Entities = map[string]provisioner.Entity{}
		for t, ls := range m.entities {
			e := p.Entities[t.entity]
			if e.Resources == nil {
				e.Resources = map[string]provisioner.Resource{}
			}
			e.Resources[t.resource] = provisioner.Resource{Limits: provisionerLimits(ls)}
			p.Entities[t.entity] = e
		}
	}
	return p
}

// warnTooLarge warns when a manifest of n changes does not fit in one run
// of the provisioner at the per-change cost measured against DynamoDB
// Local (provisioner.ChangeCost, a Delete's, the dearer kind).
func warnTooLarge(w io.Writer, n int) {
	if n <= provisioner.MaxChanges {
		return
	}
	fmt.Fprintf(w, "warning: the manifest declares %d changes; at about %s each (measured against DynamoDB Local), "+
		"one run of the provisioner (timeout %s, writing stops %s before it) does about %d, "+
		"and a run that stops answers FAILED: split the manifest into several, each with its own stack "+
		"(docs/deploy.md, \"Large manifests\")\n",
		n, provisioner.ChangeCost, provisioner.FunctionTimeout, provisioner.DefaultMargin, provisioner.MaxChanges)
}

func cmdLimitsCfnTemplate(c *cli) *command {
	f := c.newFlags("limits cfn-template", "Print a CloudFormation template declaring the manifest's limits as a Custom::ZaeLimiterLimits resource, served by the provisioner of the stack --name (deploy it with --enable-provisioner).", 0, 0, false)
	var path, out, logical string
	f.str(&path, "file", "f", "", "YAML limits manifest (required; - reads stdin)")
	f.str(&out, "output", "o", "", "write the template to this file instead of stdout")
	f.str(&logical, "logical-id", "", "Limits", "logical ID of the resource")
	f.run = func([]string) error {
		if path == "" {
			return errors.New("limits cfn-template: --file is required")
		}
		m, err := loadManifest(path, os.Stdin)
		if err != nil {
			return err
		}
		if m.namespace == "" {
			m.namespace = c.common.namespace
		}
		props := manifestProperties(c.common.name, m)
		body, err := provisioner.StackTemplate(c.common.name, logical, props)
		if err != nil {
			return err
		}
		warnTooLarge(c.stderr, props.Changes())
		if out != "" {
			if err := os.WriteFile(out, body, 0o644); err != nil {
				return fmt.Errorf("write template: %w", err)
			}
			fmt.Fprintf(c.stderr, "Template written to %s\n", out)
			return nil
		}
		_, err = c.stdout.Write(body)
		return err
	}
	return f
}
