// Package provisioner is the Lambda behind the CloudFormation custom
// resource Custom::ZaeLimiterLimits: stored limits as part of a stack.
//
// The resource's properties: TableName, Namespace (a name, default
// "default"), System {OnUnavailable, Limits}, Resources {NAME: {Limits}} and
// Entities {ID: {Resources: {NAME: {Limits}}}}, each Limits a mapping of
// limit names to {Capacity, RefillAmount (default Capacity), RefillPeriod
// (seconds, default 60)}. CloudFormation passes every scalar of a custom
// resource's properties as a string, so numbers are accepted as numbers or
// as decimal strings.
//
// The changes go through the library ([limiter.RateLimiter]'s
// SetSystemDefaults, SetResourceDefaults, SetLimits and their Delete
// counterparts), so they are validated, audited (principal: the stack's
// ID) and synced to existing buckets, like `zae-limiter limits apply`.
//
//   - Create stores what the properties declare.
//   - Update stores what the new properties declare and deletes what the
//     old properties (CloudFormation's OldResourceProperties) declared and
//     the new ones no longer do. A changed TableName or Namespace is a new
//     physical resource: CloudFormation then deletes the old one with its
//     old properties.
//   - Delete deletes what the properties declare and is stored; a missing
//     table, a resource whose creation failed before storing anything, and
//     names the library refuses (nothing can be stored under them) delete
//     nothing.
//
// Create and Update validate the whole of the properties — the table,
// namespace, resource, entity and limit names with the library's own
// rules, the numbers, the on-unavailable mode — before the first write;
// an invalid resource writes nothing and the reason lists every problem.
// A create that fails before its first write answers a physical ID of its
// own (the request's), so that CloudFormation's rollback deletes nothing;
// once writing has begun it answers the resource's ID, so that the
// rollback deletes what was stored.
//
// The function has a deadline (its timeout, [FunctionTimeout] in the
// stack's template). [Handler.Margin] before it, the handler stops writing,
// cancelling the write in flight, and answers FAILED with how far it got,
// so that CloudFormation hears the reason instead of waiting for its own
// timeout. A manifest of more than about [MaxChanges] changes does not fit
// in one run: split it over several resources or stacks.
//
// Limits the properties never declared are not touched. The physical
// resource ID is "{table}/{namespace}/limits".
package provisioner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	limiter "github.com/zaelimiter/limiter"
)

// ResourceType is the custom resource type the provisioner serves.
const ResourceType = "Custom::ZaeLimiterLimits"

// FunctionTimeout is the provisioner Lambda's timeout in the stack's
// template (infra's TestTemplateProvisionerTimeout keeps them equal).
const FunctionTimeout = 300 * time.Second

// DefaultMargin is how long before the function's deadline the handler
// stops writing when [Handler.Margin] is zero: time enough to cancel the
// write in flight and answer CloudFormation.
const DefaultMargin = 10 * time.Second

// ChangeCost is the time one change (the system defaults, a resource's
// defaults or an entity's limits on a resource, stored or deleted) is
// reckoned to take. BenchmarkChange in this package measures it against
// DynamoDB Local (go test -run XXX -bench Change -benchtime 500x
// ./infra/provisioner): a store is 3 DynamoDB requests (the config
// transaction, the read of the bucket to sync, the audit event), a delete
// 6 (the read that skips what is not stored, the old config, the config
// transaction, the registry clean-up, the audit event, the limits that
// apply now), and both took 28–46 ms per change on a two-core machine
// under load, after the emulator's warm-up.
// The figure is the dearer kind rounded up, so that the rollback of a
// manifest that fits one run fits one run too; DynamoDB itself answers a
// request in single-digit milliseconds.
const ChangeCost = 50 * time.Millisecond

// MaxChanges is how many changes fit in one run of the function at
// [ChangeCost] each, [DefaultMargin] before its deadline. `zae-limiter
// limits cfn-template` warns about a manifest with more.
const MaxChanges = int((FunctionTimeout - DefaultMargin) / ChangeCost)

// ErrDeadline is matched (errors.Is) by the error of a run that stopped
// writing [Handler.Margin] before the function's deadline.
var ErrDeadline = errors.New("stopped writing before the function's deadline")

// Handler serves the custom resource's events.
type Handler struct {
	// Client reaches the table.
	Client limiter.DynamoDBClient
	// DefaultTable is the table of properties without TableName (the
	// Lambda's TABLE_NAME).
	DefaultTable string
	// Margin is how long before the deadline of Handle's context (the
	// function's) it stops writing and answers FAILED. Zero means
	// [DefaultMargin].
	Margin time.Duration
}

// PhysicalID returns the physical resource ID of the resource managing
// namespace in table.
func PhysicalID(table, namespace string) string { return table + "/" + namespace + "/limits" }

// Handle applies one event and returns the physical resource ID and the
// response data (Table, Namespace, NamespaceId, and counts Stored and
// Deleted). [cfn.LambdaWrap] turns it into the answer to the event's
// ResponseURL.
func (h *Handler) Handle(ctx context.Context, ev cfn.Event) (string, map[string]any, error) {
	if ev.ResourceType != "" && ev.ResourceType != ResourceType {
		return ev.PhysicalResourceID, nil, fmt.Errorf("resource type %s: this function serves %s", ev.ResourceType, ResourceType)
	}
	props, err := ParseProperties(ev.ResourceProperties, h.DefaultTable)
	if err != nil {
		if ev.RequestType == cfn.RequestDelete {
			// Properties that do not parse never stored anything.
			return ev.PhysicalResourceID, nil, nil
		}
		return ev.PhysicalResourceID, nil, err
	}
	id := PhysicalID(props.TableName, props.Namespace)
	// What to store, and what to delete: on Update, what the old
	// properties declared; on Delete, what these do.
	var want, drop desired
	if ev.RequestType == cfn.RequestDelete {
		if ev.PhysicalResourceID != id {
			// Created under an ID of its own: a create that failed
			// before its first write.
			return ev.PhysicalResourceID, nil, nil
		}
		drop = props.declared()
	} else {
		if want, err = props.desired(); err != nil {
			// Nothing was written. A failed create answers an ID of its
			// own (the request's, from cfn.LambdaWrap), so its rollback
			// deletes nothing.
			return ev.PhysicalResourceID, nil, err
		}
		if ev.RequestType == cfn.RequestUpdate {
			drop = h.oldDeclared(ev, id)
		}
	}
	total := want.changes()
	for k := range drop.entities {
		if _, keep := want.entities[k]; !keep {
			total++
		}
	}
	for res := range drop.resources {
		if _, keep := want.resources[res]; !keep {
			total++
		}
	}
	if drop.system && !want.system {
		total++
	}

	margin := h.Margin
	if margin <= 0 {
		margin = DefaultMargin
	}
	wctx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(ctx, deadline.Add(-margin))
		defer cancel()
	}
	stopped := func(p progress) error {
		return fmt.Errorf("%w (%s before it) after %d of %d changes (%d stored, %d deleted); the rest was not written: "+
			"split the limits over several resources or stacks, each small enough for one run", ErrDeadline, margin, p.done, total, p.stored, p.deleted)
	}
	if wctx.Err() != nil {
		return ev.PhysicalResourceID, nil, stopped(progress{})
	}

	rl, nsID, err := h.open(wctx, props, ev)
	if err != nil {
		if ev.RequestType == cfn.RequestDelete && gone(err) {
			return id, map[string]any{"Table": props.TableName, "Namespace": props.Namespace, "Deleted": 0}, nil
		}
		if wctx.Err() != nil {
			err = stopped(progress{})
		}
		// No limit was written: a failed create keeps a physical ID of
		// its own, so its rollback deletes nothing.
		return ev.PhysicalResourceID, nil, err
	}
	defer rl.Close()
	// From here on a failure may leave part of the limits stored; the ID
	// is the resource's, so that CloudFormation's rollback deletes them.
	p, err := apply(wctx, rl, want, drop)
	if err != nil && wctx.Err() != nil {
		err = stopped(p)
	}
	data := map[string]any{"Table": props.TableName, "Namespace": props.Namespace, "NamespaceId": nsID, "Stored": p.stored, "Deleted": p.deleted}
	return id, data, err
}

// oldDeclared returns what the old properties of an Update declared, for
// deleting what the new ones no longer declare. It is nothing when they
// named another table or namespace (CloudFormation deletes that resource
// with its old properties) or did not validate (such properties never
// stored anything: an update to them failed before its first write).
func (h *Handler) oldDeclared(ev cfn.Event, id string) desired {
	old, err := ParseProperties(ev.OldResourceProperties, h.DefaultTable)
	if err != nil || PhysicalID(old.TableName, old.Namespace) != id {
		return desired{}
	}
	if _, err := old.desired(); err != nil {
		return desired{}
	}
	return old.declared()
}

// open opens the namespace, registering it when new.
func (h *Handler) open(ctx context.Context, p Properties, ev cfn.Event) (*limiter.RateLimiter, string, error) {
	repo, err := limiter.OpenDynamoDB(ctx, h.Client, func(o *limiter.DynamoDBOptions) {
		o.Table, o.Namespace = p.TableName, p.Namespace
	})
	if err != nil {
		return nil, "", fmt.Errorf("open %s namespace %s: %w", p.TableName, p.Namespace, err)
	}
	principal := "cloudformation"
	if strings.HasPrefix(ev.StackID, "arn:") {
		principal = ev.StackID
	}
	return limiter.New(repo, func(o *limiter.Options) { o.Principal = principal }), repo.NamespaceID(), nil
}

// gone reports whether err says the table is missing.
func gone(err error) bool {
	var rnf *types.ResourceNotFoundException
	return errors.As(err, &rnf) || errors.Is(err, limiter.ErrNamespaceNotFound)
}

// progress counts the changes of one run: done (stored, deleted, or found
// absent and skipped), stored and deleted.
type progress struct{ done, stored, deleted int }

// apply stores want and deletes what drop declares, want does not and is
// stored. It stops at the first error, or when ctx is done.
func apply(ctx context.Context, rl *limiter.RateLimiter, want, drop desired) (p progress, err error) {
	step := func(what string, f func() (bool, error)) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		changed, err := f()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		p.done++
		if changed {
			p.deleted++
		}
		return nil
	}
	put := func(what string, f func() error) error {
		err := step(what, func() (bool, error) { return false, f() })
		if err == nil {
			p.stored++
		}
		return err
	}
	if want.system {
		if err := put("store system defaults", func() error {
			return rl.Admin().SetSystemDefaults(ctx, want.systemLimits, want.onUnavailable)
		}); err != nil {
			return p, err
		}
	}
	for _, res := range slices.Sorted(maps.Keys(want.resources)) {
		if err := put("store defaults of resource "+res, func() error {
			return rl.Admin().SetLimits(ctx, limiter.Scope{Resource: res}, want.resources[res])
		}); err != nil {
			return p, err
		}
	}
	for _, k := range sortedPairs(want.entities) {
		if err := put("store limits of entity "+k[0]+" on "+k[1], func() error {
			return rl.Admin().SetLimits(ctx, limiter.Scope{Entity: k[0], Resource: k[1]}, want.entities[k])
		}); err != nil {
			return p, err
		}
	}
	// Deletions read first and skip what is not stored: the rollback of a
	// run stopped at its deadline deletes only what it wrote, in time.
	for _, k := range sortedPairs(drop.entities) {
		if _, keep := want.entities[k]; keep {
			continue
		}
		if err := step("delete limits of entity "+k[0]+" on "+k[1], func() (bool, error) {
			if got, err := rl.Admin().Limits(ctx, limiter.Scope{Entity: k[0], Resource: k[1]}); err != nil || len(got) == 0 {
				return false, err
			}
			return true, rl.Admin().DeleteLimits(ctx, limiter.Scope{Entity: k[0], Resource: k[1]})
		}); err != nil {
			return p, err
		}
	}
	for _, res := range slices.Sorted(maps.Keys(drop.resources)) {
		if _, keep := want.resources[res]; keep {
			continue
		}
		if err := step("delete defaults of resource "+res, func() (bool, error) {
			if got, err := rl.Admin().Limits(ctx, limiter.Scope{Resource: res}); err != nil || len(got) == 0 {
				return false, err
			}
			return true, rl.Admin().DeleteLimits(ctx, limiter.Scope{Resource: res})
		}); err != nil {
			return p, err
		}
	}
	if drop.system && !want.system {
		if err := step("delete system defaults", func() (bool, error) {
			got, err := rl.Admin().Limits(ctx, limiter.Scope{})
			if err != nil {
				return false, err
			}
			_, ou, err := rl.Admin().SystemDefaults(ctx)
			if err != nil || (len(got) == 0 && ou == "") {
				return false, err
			}
			return true, rl.Admin().DeleteLimits(ctx, limiter.Scope{})
		}); err != nil {
			return p, err
		}
	}
	return p, nil
}

func sortedPairs(m map[[2]string][]limiter.Limit) [][2]string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	return keys
}
