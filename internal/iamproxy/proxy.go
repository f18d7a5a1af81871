package iamproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Denial records one refused request.
type Denial struct {
	Operation string
	Request   Request
}

// Proxy is a running policy-enforcing proxy. It is safe for concurrent use.
type Proxy struct {
	// URL is the proxy's endpoint, to be used as the client's BaseEndpoint.
	URL string

	srv       *http.Server
	forward   *httputil.ReverseProxy
	account   string
	region    string
	hashKeys  map[string]string // index name ("" for the table) → partition key attribute
	principal Principal

	mu      sync.Mutex // guards the fields below
	denials []Denial
	allowed map[string]int // operation → forwarded requests
}

// Options configure [Start].
type Options struct {
	// Target is DynamoDB Local's endpoint.
	Target string
	// Principal is the caller every request is evaluated for.
	Principal Principal
	// HashKeys maps an index name ("" for the table) to its partition key
	// attribute ([Template.IndexHashKeys]).
	HashKeys map[string]string
	// Region and AccountID build the ARNs of the tables requests name;
	// they must agree with the [Stack] the policies were resolved for.
	// Defaults: us-east-1, 123456789012.
	Region, AccountID string
}

// Start runs a proxy on a loopback port; it is closed when the test ends.
func Start(t testing.TB, o Options) *Proxy {
	t.Helper()
	u, err := url.Parse(o.Target)
	if err != nil {
		t.Fatalf("iamproxy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("iamproxy: %v", err)
	}
	st := Stack{Region: o.Region, AccountID: o.AccountID}
	p := &Proxy{
		URL:       "http://" + ln.Addr().String(),
		forward:   httputil.NewSingleHostReverseProxy(u),
		account:   st.account(),
		region:    st.region(),
		hashKeys:  o.HashKeys,
		principal: o.Principal,
		allowed:   map[string]int{},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

// Denials returns the requests refused so far.
func (p *Proxy) Denials() []Denial {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Denial(nil), p.denials...)
}

// Allowed returns how many requests of op (all when "") were forwarded.
func (p *Proxy) Allowed(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if op != "" {
		return p.allowed[op]
	}
	n := 0
	for _, c := range p.allowed {
		n += c
	}
	return n
}

// Reset forgets the denials and counts.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.denials = nil
	p.allowed = map[string]int{}
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	op := operation(r)
	checks, err := p.checks(op, body)
	if err != nil {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"__type":"com.amazon.coral.validate#ValidationException","message":%q}`, "iamproxy: "+err.Error())
		return
	}
	for _, c := range checks {
		if p.principal.Allowed(c) {
			continue
		}
		p.mu.Lock()
		p.denials = append(p.denials, Denial{Operation: op, Request: c})
		p.mu.Unlock()
		msg := fmt.Sprintf("User: %s is not authorized to perform: %s on resource: %s because no identity-based policy allows the %s action",
			p.principal.ARN, c.Action, c.Resource, c.Action)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amzn-ErrorType", "AccessDeniedException")
		w.WriteHeader(http.StatusBadRequest)
		out, _ := json.Marshal(map[string]string{"__type": "com.amazon.coral.service#AccessDeniedException", "Message": msg})
		w.Write(out)
		return
	}
	p.mu.Lock()
	p.allowed[op]++
	p.mu.Unlock()
	p.forward.ServeHTTP(w, r)
}

func operation(r *http.Request) string {
	target := r.Header.Get("X-Amz-Target")
	if i := strings.LastIndexByte(target, '.'); i >= 0 {
		return target[i+1:]
	}
	return target
}

// attributeValue is a DynamoDB JSON attribute value; only strings matter
// here (the table's keys are strings).
type attributeValue struct {
	S *string `json:"S"`
}

type item map[string]attributeValue

type keyed struct {
	TableName string `json:"TableName"`
	Key       item   `json:"Key"`
	Item      item   `json:"Item"`
}

type request struct {
	keyed
	IndexName                 string                     `json:"IndexName"`
	KeyConditionExpression    string                     `json:"KeyConditionExpression"`
	KeyConditions             map[string]keyCondition    `json:"KeyConditions"`
	ExpressionAttributeNames  map[string]string          `json:"ExpressionAttributeNames"`
	ExpressionAttributeValues item                       `json:"ExpressionAttributeValues"`
	RequestItems              map[string]json.RawMessage `json:"RequestItems"`
	TransactItems             []map[string]keyed         `json:"TransactItems"`
}

type keyCondition struct {
	ComparisonOperator string           `json:"ComparisonOperator"`
	AttributeValueList []attributeValue `json:"AttributeValueList"`
}

func (p *Proxy) tableARN(table string) string {
	return fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", p.region, p.account, table)
}

func (p *Proxy) leadingKey(it item) []string {
	if v, ok := it[p.hashKeys[""]]; ok && v.S != nil {
		return []string{*v.S}
	}
	return nil
}

// checks returns the authorisation checks of one request.
func (p *Proxy) checks(op string, body []byte) ([]Request, error) {
	var in request
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	action := "dynamodb:" + op
	switch op {
	case "GetItem", "UpdateItem", "DeleteItem":
		return []Request{{Action: action, Resource: p.tableARN(in.TableName), LeadingKeys: p.leadingKey(in.Key)}}, nil
	case "PutItem":
		return []Request{{Action: action, Resource: p.tableARN(in.TableName), LeadingKeys: p.leadingKey(in.Item)}}, nil
	case "Query":
		res := p.tableARN(in.TableName)
		if in.IndexName != "" {
			res += "/index/" + in.IndexName
		}
		key, err := p.queryKey(in)
		if err != nil {
			return nil, err
		}
		return []Request{{Action: action, Resource: res, LeadingKeys: key}}, nil
	case "BatchGetItem":
		var tables map[string]struct {
			Keys []item `json:"Keys"`
		}
		if err := remarshal(in.RequestItems, &tables); err != nil {
			return nil, err
		}
		var out []Request
		for table, t := range tables {
			c := Request{Action: action, Resource: p.tableARN(table)}
			for _, k := range t.Keys {
				c.LeadingKeys = append(c.LeadingKeys, p.leadingKey(k)...)
			}
			out = append(out, c)
		}
		return out, nil
	case "BatchWriteItem":
		var tables map[string][]struct {
			PutRequest    *struct{ Item item }
			DeleteRequest *struct{ Key item }
		}
		if err := remarshal(in.RequestItems, &tables); err != nil {
			return nil, err
		}
		var out []Request
		for table, reqs := range tables {
			c := Request{Action: action, Resource: p.tableARN(table)}
			for _, r := range reqs {
				switch {
				case r.PutRequest != nil:
					c.LeadingKeys = append(c.LeadingKeys, p.leadingKey(r.PutRequest.Item)...)
				case r.DeleteRequest != nil:
					c.LeadingKeys = append(c.LeadingKeys, p.leadingKey(r.DeleteRequest.Key)...)
				}
			}
			out = append(out, c)
		}
		return out, nil
	case "TransactWriteItems", "TransactGetItems":
		var out []Request
		for _, ti := range in.TransactItems {
			for kind, k := range ti {
				a := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
					"ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}[kind]
				if a == "" {
					return nil, fmt.Errorf("%s: unknown item kind %q", op, kind)
				}
				key := k.Key
				if kind == "Put" {
					key = k.Item
				}
				out = append(out, Request{Action: "dynamodb:" + a, Resource: p.tableARN(k.TableName), LeadingKeys: p.leadingKey(key)})
			}
		}
		return out, nil
	}
	// Scan and the table-level operations name no key.
	return []Request{{Action: action, Resource: p.tableARN(in.TableName)}}, nil
}

var (
	keyClause = regexp.MustCompile(`^\(*\s*([#:\w.-]+)\s*=\s*([#:\w.-]+)\s*\)*$`)
	andWord   = regexp.MustCompile(`(?i)\s+and\s+`)
)

// queryKey returns the value the query's key condition gives the index's
// (or table's) partition key.
func (p *Proxy) queryKey(in request) ([]string, error) {
	attr, ok := p.hashKeys[in.IndexName]
	if !ok {
		return nil, fmt.Errorf("query: unknown index %q", in.IndexName)
	}
	if c, ok := in.KeyConditions[attr]; ok && len(c.AttributeValueList) == 1 && c.AttributeValueList[0].S != nil {
		return []string{*c.AttributeValueList[0].S}, nil
	}
	name := func(tok string) string {
		if n, ok := in.ExpressionAttributeNames[tok]; ok {
			return n
		}
		return tok
	}
	for _, clause := range andWord.Split(in.KeyConditionExpression, -1) {
		m := keyClause.FindStringSubmatch(strings.TrimSpace(clause))
		if m == nil {
			continue
		}
		l, r := m[1], m[2]
		if strings.HasPrefix(l, ":") {
			l, r = r, l
		}
		if name(l) == attr {
			if v, ok := in.ExpressionAttributeValues[r]; ok && v.S != nil {
				return []string{*v.S}, nil
			}
		}
	}
	return nil, fmt.Errorf("query: no equality on %s in %q", attr, in.KeyConditionExpression)
}

func remarshal(in any, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
