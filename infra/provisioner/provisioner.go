// Package provisioner is the Lambda behind the CloudFormation custom
// resource Custom::ZaeLimiterLimits: stored limits as part of a stack.
//
// The resource's properties are the original's: TableName, Namespace (a
// name, default "default"), System {OnUnavailable, Limits}, Resources
// {NAME: {Limits}} and Entities {ID: {Resources: {NAME: {Limits}}}}, each
// Limits a mapping of limit names to {Capacity, RefillAmount (default
// Capacity), RefillPeriod (seconds, default 60)}. CloudFormation passes
// every scalar of a custom resource's properties as a string, so numbers
// are accepted as numbers or as decimal strings.
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
//   - Delete deletes what the properties declare; a missing table or
//     namespace, or a resource whose creation failed, deletes nothing.
//
// Limits the properties never declared are not touched. The physical
// resource ID is "{table}/{namespace}/limits".
package provisioner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	limiter "github.com/zaelimiter/limiter"
)

// ResourceType is the custom resource type the provisioner serves.
const ResourceType = "Custom::ZaeLimiterLimits"

// Limit is one limit declaration.
type Limit struct {
	Capacity     Number `json:"Capacity"`
	RefillAmount Number `json:"RefillAmount,omitempty"`
	RefillPeriod Number `json:"RefillPeriod,omitempty"`
}

// Number is an integer given as a JSON number or a decimal string (as
// CloudFormation sends it). Zero means not given.
type Number int64

// UnmarshalJSON accepts 5 and "5".
func (n *Number) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%s is not an integer", b)
	}
	*n = Number(v)
	return nil
}

// Limits maps limit names to declarations.
type Limits map[string]Limit

// System is the namespace's defaults.
type System struct {
	OnUnavailable string `json:"OnUnavailable,omitempty"`
	Limits        Limits `json:"Limits,omitempty"`
}

// Resource is one resource's defaults, or an entity's limits on one
// resource.
type Resource struct {
	Limits Limits `json:"Limits"`
}

// Entity is one entity's limits per resource ("_default_" for every
// resource without its own).
type Entity struct {
	Resources map[string]Resource `json:"Resources"`
}

// Properties are the custom resource's properties.
type Properties struct {
	ServiceToken string              `json:"ServiceToken,omitempty"`
	TableName    string              `json:"TableName"`
	Namespace    string              `json:"Namespace,omitempty"`
	System       *System             `json:"System,omitempty"`
	Resources    map[string]Resource `json:"Resources,omitempty"`
	Entities     map[string]Entity   `json:"Entities,omitempty"`
}

// ParseProperties decodes a resource's properties (as the event carries
// them) and fills the defaults: TableName defaultTable when empty,
// Namespace "default".
func ParseProperties(raw map[string]any, defaultTable string) (Properties, error) {
	var p Properties
	if raw == nil {
		return p, errors.New("no properties")
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("invalid properties: %w", err)
	}
	if p.TableName == "" {
		p.TableName = defaultTable
	}
	if p.TableName == "" {
		return p, errors.New("invalid properties: TableName is required")
	}
	if p.Namespace == "" {
		p.Namespace = limiter.DefaultNamespace
	}
	return p, nil
}

// desired is what a set of properties declares, validated.
type desired struct {
	system        bool
	systemLimits  []limiter.Limit
	onUnavailable limiter.OnUnavailable
	resources     map[string][]limiter.Limit
	entities      map[[2]string][]limiter.Limit // {entity, resource}
}

func toLimits(path string, ls Limits) ([]limiter.Limit, error) {
	out := make([]limiter.Limit, 0, len(ls))
	for _, name := range slices.Sorted(maps.Keys(ls)) {
		d := ls[name]
		if d.Capacity <= 0 {
			return nil, fmt.Errorf("%s.%s: Capacity must be a positive integer", path, name)
		}
		refill, period := int64(d.Capacity), int64(60)
		if d.RefillAmount != 0 {
			refill = int64(d.RefillAmount)
		}
		if d.RefillPeriod != 0 {
			period = int64(d.RefillPeriod)
		}
		if period <= 0 || period > int64(1<<62)/int64(time.Second) {
			return nil, fmt.Errorf("%s.%s: RefillPeriod must be a positive number of seconds", path, name)
		}
		l, err := limiter.NewLimit(name, int64(d.Capacity), refill, time.Duration(period)*time.Second)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", path, name, err)
		}
		out = append(out, l)
	}
	return out, nil
}

func (p Properties) desired() (desired, error) {
	d := desired{resources: map[string][]limiter.Limit{}, entities: map[[2]string][]limiter.Limit{}}
	if s := p.System; s != nil {
		d.system = true
		var err error
		if d.systemLimits, err = toLimits("System.Limits", s.Limits); err != nil {
			return d, err
		}
		d.onUnavailable = limiter.OnUnavailable(strings.ToLower(s.OnUnavailable))
		if d.onUnavailable != "" && !d.onUnavailable.Valid() {
			return d, fmt.Errorf("property System.OnUnavailable %q: use allow or block", s.OnUnavailable)
		}
	}
	for name, r := range p.Resources {
		ls, err := toLimits("Resources."+name+".Limits", r.Limits)
		if err != nil {
			return d, err
		}
		if len(ls) == 0 {
			return d, fmt.Errorf("property Resources.%s declares no limits", name)
		}
		d.resources[name] = ls
	}
	for id, e := range p.Entities {
		for res, r := range e.Resources {
			ls, err := toLimits("Entities."+id+".Resources."+res+".Limits", r.Limits)
			if err != nil {
				return d, err
			}
			if len(ls) == 0 {
				return d, fmt.Errorf("property Entities.%s.Resources.%s declares no limits", id, res)
			}
			d.entities[[2]string{id, res}] = ls
		}
	}
	return d, nil
}

// Handler serves the custom resource's events.
type Handler struct {
	// Client reaches the table.
	Client limiter.DynamoDBClient
	// DefaultTable is the table of properties without TableName (the
	// Lambda's TABLE_NAME).
	DefaultTable string
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
		return ev.PhysicalResourceID, nil, err
	}
	id := PhysicalID(props.TableName, props.Namespace)
	want, err := props.desired()
	if ev.RequestType == cfn.RequestDelete {
		if ev.PhysicalResourceID != id || err != nil {
			// Created under another ID (a failed create) or never valid:
			// nothing of it was stored.
			return ev.PhysicalResourceID, nil, nil
		}
		want = desired{}
	} else if err != nil {
		return ev.PhysicalResourceID, nil, err
	}

	// What to delete: on Update, what the old properties declared (when
	// they name the same table and namespace); on Delete, what these do.
	var drop desired
	switch ev.RequestType {
	case cfn.RequestDelete:
		drop, _ = props.desired()
	case cfn.RequestUpdate:
		if old, err := ParseProperties(ev.OldResourceProperties, h.DefaultTable); err == nil &&
			PhysicalID(old.TableName, old.Namespace) == id {
			drop, _ = old.desired()
		}
	}

	rl, nsID, err := h.open(ctx, props, ev)
	if err != nil {
		if ev.RequestType == cfn.RequestDelete && gone(err) {
			return id, map[string]any{"Table": props.TableName, "Namespace": props.Namespace, "Deleted": 0}, nil
		}
		// Nothing was stored: a failed create keeps a physical ID of its
		// own, so its rollback deletes nothing.
		return ev.PhysicalResourceID, nil, err
	}
	defer rl.Close()
	// From here on a failure may leave part of the limits stored; the ID
	// is the resource's, so that CloudFormation's rollback deletes them.
	stored, deleted, err := apply(ctx, rl, want, drop)
	data := map[string]any{"Table": props.TableName, "Namespace": props.Namespace, "NamespaceId": nsID, "Stored": stored, "Deleted": deleted}
	return id, data, err
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
	return limiter.New(repo, limiter.WithPrincipal(principal)), repo.NamespaceID(), nil
}

// gone reports whether err says the table is missing.
func gone(err error) bool {
	var rnf *types.ResourceNotFoundException
	return errors.As(err, &rnf) || errors.Is(err, limiter.ErrNamespaceNotFound)
}

// apply stores want and deletes what drop declares and want does not.
func apply(ctx context.Context, rl *limiter.RateLimiter, want, drop desired) (stored, deleted int, err error) {
	if want.system {
		if err := rl.SetSystemDefaults(ctx, want.systemLimits, want.onUnavailable); err != nil {
			return stored, deleted, fmt.Errorf("store system defaults: %w", err)
		}
		stored++
	}
	for _, res := range slices.Sorted(maps.Keys(want.resources)) {
		if err := rl.SetResourceDefaults(ctx, res, want.resources[res]); err != nil {
			return stored, deleted, fmt.Errorf("store defaults of resource %s: %w", res, err)
		}
		stored++
	}
	for _, k := range sortedPairs(want.entities) {
		if err := rl.SetLimits(ctx, k[0], k[1], want.entities[k]); err != nil {
			return stored, deleted, fmt.Errorf("store limits of entity %s on %s: %w", k[0], k[1], err)
		}
		stored++
	}
	for _, k := range sortedPairs(drop.entities) {
		if _, keep := want.entities[k]; keep {
			continue
		}
		if err := rl.DeleteLimits(ctx, k[0], k[1]); err != nil {
			return stored, deleted, fmt.Errorf("delete limits of entity %s on %s: %w", k[0], k[1], err)
		}
		deleted++
	}
	for _, res := range slices.Sorted(maps.Keys(drop.resources)) {
		if _, keep := want.resources[res]; keep {
			continue
		}
		if err := rl.DeleteResourceDefaults(ctx, res); err != nil {
			return stored, deleted, fmt.Errorf("delete defaults of resource %s: %w", res, err)
		}
		deleted++
	}
	if drop.system && !want.system {
		if err := rl.DeleteSystemDefaults(ctx); err != nil {
			return stored, deleted, fmt.Errorf("delete system defaults: %w", err)
		}
		deleted++
	}
	return stored, deleted, nil
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
