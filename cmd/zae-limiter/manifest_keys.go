package main

// The manifest's keys, checked before decoding so that a typo is answered
// in the manifest's terms: where it is (the limit, resource or entity, its
// path and line) and the field meant, never a Go type name.

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// keySchema is one level of the manifest: a mapping with fixed fields
// (fields; a nil schema is a leaf), or with keys the user chooses (any:
// resources, entities, limit names). name says what the level is, given
// the keys of the path to it.
type keySchema struct {
	name   func(path []string) string
	fields map[string]*keySchema
	any    *keySchema
}

// manifestSchema is the manifest's layout.
var manifestSchema = func() *keySchema {
	limit := &keySchema{
		name: func(p []string) string { return "limit " + p[len(p)-1] },
		fields: map[string]*keySchema{"capacity": nil, "burst": nil, "refill_amount": nil, "refill_period": nil,
			"calendar": nil, "timezone": nil, "prepaid": nil, "inflight": nil},
	}
	limits := &keySchema{name: func(p []string) string { return "the limits of " + strings.Join(p[:len(p)-1], ".") }, any: limit}
	level := func(name func(p []string) string) *keySchema {
		return &keySchema{name: name, fields: map[string]*keySchema{
			"limits": limits, "usd_per_day": nil, "usd_per_week": nil, "usd_per_month": nil,
		}}
	}
	system := level(func([]string) string { return "system" })
	system.fields["on_unavailable"] = nil
	resource := level(func(p []string) string { return "resource " + p[len(p)-1] })
	entityResource := level(func(p []string) string { return "resource " + p[len(p)-1] + " of entity " + p[1] })
	entity := &keySchema{name: func(p []string) string { return "entity " + p[len(p)-1] }, fields: map[string]*keySchema{
		"resources": {name: func(p []string) string { return "the resources of entity " + p[1] }, any: entityResource},
	}}
	return &keySchema{name: func([]string) string { return "the manifest" }, fields: map[string]*keySchema{
		"namespace": nil,
		"system":    system,
		"resources": {name: func([]string) string { return "resources" }, any: resource},
		"entities":  {name: func([]string) string { return "entities" }, any: entity},
	}}
}()

// checkManifestKeys returns an error naming the first unknown field of the
// manifest in document order, with the field meant when one is close, or
// nil. Values of the wrong kind are left to the decoder.
func checkManifestKeys(data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil // the decoder reports it
	}
	return checkKeys(doc.Content[0], manifestSchema, nil)
}

func checkKeys(n *yaml.Node, s *keySchema, path []string) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode || s == nil {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if key.Tag == "!!merge" {
			if err := checkKeys(val, s, path); err != nil {
				return err
			}
			continue
		}
		child := s.any
		if child == nil {
			c, ok := s.fields[key.Value]
			if !ok {
				return unknownField(key, s, path)
			}
			child = c
		}
		if err := checkKeys(val, child, append(slices.Clip(path), key.Value)); err != nil {
			return err
		}
	}
	return nil
}

// unknownField is the error of key, unknown at level s of path.
func unknownField(key *yaml.Node, s *keySchema, path []string) error {
	where := s.name(path)
	if len(path) > 0 {
		where += " (" + strings.Join(path, ".") + ")"
	}
	known := make([]string, 0, len(s.fields))
	for f := range s.fields {
		known = append(known, f)
	}
	slices.Sort(known)
	msg := fmt.Sprintf("invalid manifest: line %d: unknown field %s in %s", key.Line, key.Value, where)
	if m := suggest(key.Value, known); m != "" {
		return fmt.Errorf("%s; did you mean %s?", msg, m)
	}
	return fmt.Errorf("%s; the fields there are %s", msg, strings.Join(known, ", "))
}

// manifestTypeNames rewrites the Go types a decoding error names into what
// the manifest calls them.
var manifestTypeNames = strings.NewReplacer(
	"into main.manifestFile", "into the manifest (a mapping of namespace, system, resources, entities)",
	"into main.manifestSystem", "into system (a mapping of limits, on_unavailable, usd_per_*)",
	"into main.manifestLimits", "into a resource (a mapping of limits, usd_per_*)",
	"into main.manifestEntities", "into an entity (a mapping with resources)",
	"into main.manifestDecl", "into a limit (a mapping such as {capacity: 100, refill_period: 60})",
	"into map[string]main.manifestDecl", "into limits (a mapping of limit names to limits)",
	"into map[string]main.manifestLimits", "into resources (a mapping of resource names)",
	"into map[string]main.manifestEntities", "into entities (a mapping of entity ids)",
	"into *int64", "into an integer",
	"into int64", "into an integer",
	"into *string", "into a string",
	"into bool", "into true or false",
)
