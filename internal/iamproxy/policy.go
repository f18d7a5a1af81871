// Package iamproxy is a test-only HTTP proxy between a DynamoDB client and
// DynamoDB Local that enforces IAM identity policies the way DynamoDB does:
// a request is forwarded only when the principal's policies allow every
// action it performs, on the table or index it names, for the partition key
// of every item it touches (the condition key dynamodb:LeadingKeys).
// Otherwise it answers 400 AccessDeniedException, as DynamoDB does, and
// nothing reaches the emulator.
//
// The policies are read from the CloudFormation template itself
// ([FromTemplate]), so a test exercises the documents a stack really
// deploys, not a copy. What the evaluator covers is what those documents
// use: Allow and Deny statements, actions and resources with * and ?
// wildcards, and the condition operators ForAllValues:StringLike,
// ForAllValues:StringEquals and StringEquals/StringLike on
// dynamodb:LeadingKeys, with the policy variable
// ${aws:PrincipalTag/KEY}. Any other condition makes its statement not
// apply (for an Allow: the request is denied), so a policy that grows a
// condition this package does not know fails the tests instead of passing
// them silently.
//
// How requests map to authorisation checks, as DynamoDB documents it:
// a single-item operation is one check of its own action with its key; a
// batch is one check of the batch action per table with all its keys;
// a transaction is one check per item, of the item's action (Put →
// PutItem, Update → UpdateItem, Delete → DeleteItem, ConditionCheck →
// ConditionCheckItem, Get → GetItem); a Query names the index's partition
// key value as its leading key and the index's ARN
// (table/NAME/index/INDEX) as its resource; a Scan and the table-level
// operations carry no leading key (ForAllValues over an empty set holds).
package iamproxy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Statement is one statement of an identity policy, its intrinsic
// functions resolved.
type Statement struct {
	Sid       string
	Effect    string // "Allow" or "Deny"
	Actions   []string
	Resources []string
	// Conditions maps an operator (e.g. "ForAllValues:StringLike") to
	// condition keys and their values.
	Conditions map[string]map[string][]string
}

// Policy is an identity policy.
type Policy struct {
	Name       string
	Statements []Statement
}

// Principal is the caller: its ARN (for error messages) and its tags,
// which ${aws:PrincipalTag/KEY} reads.
type Principal struct {
	ARN      string
	Tags     map[string]string
	Policies []Policy
}

// Request is one authorisation check.
type Request struct {
	Action   string // e.g. "dynamodb:GetItem"
	Resource string // the table's or index's ARN
	// LeadingKeys are the partition key values the check covers; empty
	// for operations that name no key.
	LeadingKeys []string
}

// Allowed reports whether p may perform r: some Allow statement matches
// and no Deny statement does.
func (p Principal) Allowed(r Request) bool {
	allowed := false
	for _, pol := range p.Policies {
		for _, s := range pol.Statements {
			if !s.matches(p, r) {
				continue
			}
			if s.Effect == "Deny" {
				return false
			}
			allowed = true
		}
	}
	return allowed
}

func (s Statement) matches(p Principal, r Request) bool {
	if !slices.ContainsFunc(s.Actions, func(a string) bool { return wildcardMatch(strings.ToLower(a), strings.ToLower(r.Action)) }) {
		return false
	}
	if !slices.ContainsFunc(s.Resources, func(res string) bool { return wildcardMatch(res, r.Resource) }) {
		return false
	}
	for op, keys := range s.Conditions {
		for key, values := range keys {
			if key != "dynamodb:LeadingKeys" {
				return false // an unknown condition key: not evaluated, so not granted
			}
			patterns := make([]string, 0, len(values))
			for _, v := range values {
				resolved, ok := p.substitute(v)
				if !ok {
					return false // a variable without a value matches nothing
				}
				patterns = append(patterns, resolved)
			}
			if !condition(op, patterns, r.LeadingKeys) {
				return false
			}
		}
	}
	return true
}

// condition evaluates one operator on the request's leading keys.
func condition(op string, patterns, values []string) bool {
	like := func(v string) bool {
		return slices.ContainsFunc(patterns, func(p string) bool { return wildcardMatch(p, v) })
	}
	equals := func(v string) bool { return slices.Contains(patterns, v) }
	switch op {
	case "ForAllValues:StringLike":
		return !slices.ContainsFunc(values, func(v string) bool { return !like(v) })
	case "ForAllValues:StringEquals":
		return !slices.ContainsFunc(values, func(v string) bool { return !equals(v) })
	case "StringLike":
		return len(values) == 1 && like(values[0])
	case "StringEquals":
		return len(values) == 1 && equals(values[0])
	}
	return false
}

var policyVariable = regexp.MustCompile(`\$\{([^}]*)\}`)

// substitute resolves ${aws:PrincipalTag/KEY} in v; ok is false when a
// variable has no value.
func (p Principal) substitute(v string) (string, bool) {
	ok := true
	out := policyVariable.ReplaceAllStringFunc(v, func(m string) string {
		name := m[2 : len(m)-1]
		if tag, found := strings.CutPrefix(name, "aws:PrincipalTag/"); found {
			if val, has := p.Tags[tag]; has {
				return val
			}
		}
		ok = false
		return ""
	})
	return out, ok
}

// wildcardMatch matches s against an IAM pattern: * is any run of
// characters, ? one character; everything else is literal.
func wildcardMatch(pattern, s string) bool {
	// Not path.Match: its * stops at "/" and it reads [ and \ specially.
	return globMatch([]rune(pattern), []rune(s))
}

func globMatch(p, s []rune) bool {
	// Iterative matching with backtracking on the last star.
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// Stack names the values a template's intrinsics resolve to.
type Stack struct {
	Name      string // AWS::StackName, also the table's name
	Region    string // default us-east-1
	AccountID string // default 123456789012
	// Parameters are the template parameters !Ref and !Sub read; a
	// parameter absent here takes its template default.
	Parameters map[string]string
}

func (st Stack) region() string {
	if st.Region == "" {
		return "us-east-1"
	}
	return st.Region
}

func (st Stack) account() string {
	if st.AccountID == "" {
		return "123456789012"
	}
	return st.AccountID
}

// TableARN returns the ARN of the stack's table.
func (st Stack) TableARN() string {
	return fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", st.region(), st.account(), st.Name)
}

// Template is a parsed CloudFormation template.
type Template struct {
	root  map[string]any
	stack Stack
}

// ParseTemplate parses a CloudFormation template (YAML, short-form
// intrinsics allowed) for the stack st.
func ParseTemplate(tpl []byte, st Stack) (*Template, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(tpl, &doc); err != nil {
		return nil, fmt.Errorf("iamproxy: parse template: %w", err)
	}
	root, ok := cfnValue(&doc).(map[string]any)
	if !ok {
		return nil, errors.New("iamproxy: template is not a mapping")
	}
	return &Template{root: root, stack: st}, nil
}

// FromTemplate parses tpl and returns the managed policy of the resource
// logicalID (an AWS::IAM::ManagedPolicy), its intrinsics resolved for st.
func FromTemplate(tpl []byte, logicalID string, st Stack) (Policy, error) {
	t, err := ParseTemplate(tpl, st)
	if err != nil {
		return Policy{}, err
	}
	return t.Policy(logicalID)
}

// Policy returns the managed policy of the resource logicalID.
func (t *Template) Policy(logicalID string) (Policy, error) {
	res, ok := lookup(t.root, "Resources", logicalID).(map[string]any)
	if !ok {
		return Policy{}, fmt.Errorf("iamproxy: no resource %s in the template", logicalID)
	}
	doc, ok := lookup(res, "Properties", "PolicyDocument").(map[string]any)
	if !ok {
		return Policy{}, fmt.Errorf("iamproxy: resource %s has no PolicyDocument", logicalID)
	}
	resolved, err := t.resolve(doc)
	if err != nil {
		return Policy{}, fmt.Errorf("iamproxy: %s: %w", logicalID, err)
	}
	stmts, _ := resolved.(map[string]any)["Statement"].([]any)
	pol := Policy{Name: logicalID}
	for i, raw := range stmts {
		m, ok := raw.(map[string]any)
		if !ok {
			return Policy{}, fmt.Errorf("iamproxy: %s: statement %d is not a mapping", logicalID, i)
		}
		s := Statement{
			Effect:    fmt.Sprint(m["Effect"]),
			Actions:   strings1(m["Action"]),
			Resources: strings1(m["Resource"]),
		}
		if sid, ok := m["Sid"].(string); ok {
			s.Sid = sid
		}
		if _, ok := m["NotAction"]; ok {
			return Policy{}, fmt.Errorf("iamproxy: %s: NotAction is not supported", logicalID)
		}
		if cond, ok := m["Condition"].(map[string]any); ok {
			s.Conditions = map[string]map[string][]string{}
			for op, keys := range cond {
				km, _ := keys.(map[string]any)
				s.Conditions[op] = map[string][]string{}
				for k, v := range km {
					s.Conditions[op][k] = strings1(v)
				}
			}
		}
		pol.Statements = append(pol.Statements, s)
	}
	return pol, nil
}

// ManagedPolicies returns the logical IDs of the template's
// AWS::IAM::ManagedPolicy resources, sorted.
func (t *Template) ManagedPolicies() []string {
	res, _ := lookup(t.root, "Resources").(map[string]any)
	var out []string
	for id, r := range res {
		if m, ok := r.(map[string]any); ok && m["Type"] == "AWS::IAM::ManagedPolicy" {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// IndexHashKeys returns the partition key attribute of the table (under
// "") and of each of its indexes, from the template's table resource.
func (t *Template) IndexHashKeys(tableLogicalID string) (map[string]string, error) {
	props, ok := lookup(t.root, "Resources", tableLogicalID, "Properties").(map[string]any)
	if !ok {
		return nil, fmt.Errorf("iamproxy: no table %s in the template", tableLogicalID)
	}
	hash := func(ks any) string {
		list, _ := ks.([]any)
		for _, e := range list {
			if m, ok := e.(map[string]any); ok && m["KeyType"] == "HASH" {
				return fmt.Sprint(m["AttributeName"])
			}
		}
		return ""
	}
	keys := map[string]string{"": hash(props["KeySchema"])}
	for _, field := range []string{"GlobalSecondaryIndexes", "LocalSecondaryIndexes"} {
		list, _ := props[field].([]any)
		for _, e := range list {
			m, _ := e.(map[string]any)
			keys[fmt.Sprint(m["IndexName"])] = hash(m["KeySchema"])
		}
	}
	if keys[""] == "" {
		return nil, fmt.Errorf("iamproxy: table %s has no partition key", tableLogicalID)
	}
	return keys, nil
}

func strings1(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return nil
}

func lookup(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// resolve evaluates the intrinsics a policy document uses: Ref,
// Fn::GetAtt of the table's Arn and StreamArn, Fn::Sub, Fn::If is refused.
func (t *Template) resolve(v any) (any, error) {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			r, err := t.resolve(e)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		if len(v) == 1 {
			for k, arg := range v {
				switch k {
				case "Ref":
					return t.ref(fmt.Sprint(arg))
				case "Fn::GetAtt":
					parts := strings1(arg)
					if len(parts) != 2 {
						return nil, fmt.Errorf("Fn::GetAtt %v", arg)
					}
					return t.getAtt(parts[0], parts[1])
				case "Fn::Sub":
					s, ok := arg.(string)
					if !ok {
						return nil, errors.New("Fn::Sub with a variable map is not supported")
					}
					return t.sub(s)
				}
				if strings.HasPrefix(k, "Fn::") {
					return nil, fmt.Errorf("intrinsic %s is not supported", k)
				}
			}
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			r, err := t.resolve(e)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	}
	return v, nil
}

func (t *Template) ref(name string) (string, error) {
	switch name {
	case "AWS::StackName":
		return t.stack.Name, nil
	case "AWS::Region":
		return t.stack.region(), nil
	case "AWS::AccountId":
		return t.stack.account(), nil
	case "AWS::Partition":
		return "aws", nil
	case "RateLimitsTable":
		return t.stack.Name, nil
	}
	if v, ok := t.stack.Parameters[name]; ok {
		return v, nil
	}
	if def, ok := lookup(t.root, "Parameters", name).(map[string]any); ok {
		if d, ok := def["Default"]; ok {
			return fmt.Sprint(d), nil
		}
	}
	return "", fmt.Errorf("no value for Ref %s", name)
}

func (t *Template) getAtt(resource, attr string) (string, error) {
	if resource == "RateLimitsTable" {
		switch attr {
		case "Arn":
			return t.stack.TableARN(), nil
		case "StreamArn":
			return t.stack.TableARN() + "/stream/1970-01-01T00:00:00.000", nil
		}
	}
	return "", fmt.Errorf("Fn::GetAtt %s.%s is not supported", resource, attr)
}

var subVariable = regexp.MustCompile(`\$\{([^}!]*)\}`)

func (t *Template) sub(s string) (string, error) {
	var err error
	out := subVariable.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		var v string
		var e error
		if res, attr, ok := strings.Cut(name, "."); ok {
			v, e = t.getAtt(res, attr)
		} else {
			v, e = t.ref(name)
		}
		if e != nil && err == nil {
			err = e
		}
		return v
	})
	return out, err
}

// cfnValue converts a YAML node of a CloudFormation template into plain Go
// values, short-form intrinsics (!Ref X, !Sub s, !GetAtt A.B) becoming
// their long form ({"Ref": X}, {"Fn::Sub": s}, ...).
func cfnValue(n *yaml.Node) any {
	var v any
	switch n.Kind {
	case yaml.DocumentNode:
		return cfnValue(n.Content[0])
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i < len(n.Content); i += 2 {
			m[n.Content[i].Value] = cfnValue(n.Content[i+1])
		}
		v = m
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, c := range n.Content {
			s[i] = cfnValue(c)
		}
		v = s
	case yaml.ScalarNode:
		if custom := strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!"); custom || n.Decode(&v) != nil {
			v = n.Value
		}
	case yaml.AliasNode:
		return cfnValue(n.Alias)
	}
	if tag := n.Tag; strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!") {
		switch tag {
		case "!Ref":
			return map[string]any{"Ref": v}
		case "!GetAtt":
			if s, ok := v.(string); ok {
				a, b, _ := strings.Cut(s, ".")
				v = []any{a, b}
			}
			return map[string]any{"Fn::GetAtt": v}
		default:
			return map[string]any{"Fn::" + tag[1:]: v}
		}
	}
	return v
}
