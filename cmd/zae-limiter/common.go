package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// Output formats of --output.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// commonFlags are the flags every command accepts.
type commonFlags struct {
	name      string // stack and table name
	region    string
	endpoint  string
	namespace string
	output    string
	// explicit records the long names of the flags given on the command line.
	explicit map[string]bool
}

// cmdFlags is one command's flag set with its help text.
type cmdFlags struct {
	fs      *flag.FlagSet
	use     string // e.g. "entity create ENTITY_ID"
	summary string
	minArgs int
	maxArgs int               // -1: unbounded
	short   map[string]string // long name → short alias
	order   []string          // long names in registration order
	c       *cli
	// post runs after a successful parse, e.g. to convert flag values.
	post []func()
}

// newFlags returns the flag set of the command use, with the common flags
// registered. Commands that print something other than a table or JSON pass
// withOutput false and may define --output themselves.
func (c *cli) newFlags(use, summary string, minArgs, maxArgs int, withOutput bool) *cmdFlags {
	f := &cmdFlags{
		fs: flag.NewFlagSet(use, flag.ContinueOnError), use: use, summary: summary,
		minArgs: minArgs, maxArgs: maxArgs, short: map[string]string{}, c: c,
	}
	f.fs.SetOutput(io.Discard)
	f.fs.Usage = func() {}
	f.str(&c.common.name, "name", "n", envOr(limiter.EnvStack, limiter.DefaultTable), "stack and table name ($ZAEL_STACK)")
	f.str(&c.common.region, "region", "", "", "AWS region (default: the SDK's configuration)")
	f.str(&c.common.endpoint, "endpoint-url", "", "", "AWS endpoint URL, e.g. http://localhost:8000 for DynamoDB Local")
	f.str(&c.common.namespace, "namespace", "N", envOr(limiter.EnvNamespace, limiter.DefaultNamespace), "namespace within the table ($ZAEL_NAMESPACE)")
	c.common.output = outputTable
	if withOutput {
		f.str(&c.common.output, "output", "o", outputTable, "output format: table or json")
	}
	return f
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func (f *cmdFlags) register(long, short string) {
	f.order = append(f.order, long)
	if short != "" {
		f.short[long] = short
	}
}

// str defines a string flag with an optional one-letter alias.
func (f *cmdFlags) str(p *string, long, short, def, usage string) {
	f.fs.StringVar(p, long, def, usage)
	if short != "" {
		f.fs.StringVar(p, short, def, usage)
	}
	f.register(long, short)
}

// integer defines an int flag.
func (f *cmdFlags) integer(p *int, long, short string, def int, usage string) {
	f.fs.IntVar(p, long, def, usage)
	if short != "" {
		f.fs.IntVar(p, short, def, usage)
	}
	f.register(long, short)
}

// duration defines a time.Duration flag.
func (f *cmdFlags) duration(p *time.Duration, long, short string, def time.Duration, usage string) {
	f.fs.DurationVar(p, long, def, usage)
	if short != "" {
		f.fs.DurationVar(p, short, def, usage)
	}
	f.register(long, short)
}

// float defines a float64 flag.
func (f *cmdFlags) float(p *float64, long, short string, def float64, usage string) {
	f.fs.Float64Var(p, long, def, usage)
	if short != "" {
		f.fs.Float64Var(p, short, def, usage)
	}
	f.register(long, short)
}

// boolean defines a bool flag.
func (f *cmdFlags) boolean(p *bool, long, short string, def bool, usage string) {
	f.fs.BoolVar(p, long, def, usage)
	if short != "" {
		f.fs.BoolVar(p, short, def, usage)
	}
	f.register(long, short)
}

// pair defines a --on/--off pair of bool flags writing *p, like click's
// "--enable-x/--no-x" options.
func (f *cmdFlags) pair(p *bool, on, off string, def bool, usage string) {
	*p = def
	f.fs.Var(boolSetter{p: p, value: true}, on, usage)
	f.fs.Var(boolSetter{p: p, value: false}, off, usage)
	d := off
	if def {
		d = on
	}
	f.order = append(f.order, on+"|"+off+"|"+d)
}

// list defines a repeatable string flag.
func (f *cmdFlags) list(p *[]string, long, short, usage string) {
	f.fs.Var((*stringList)(p), long, usage)
	if short != "" {
		f.fs.Var((*stringList)(p), short, usage)
	}
	f.register(long, short)
}

// boolSetter is a bool flag that stores a fixed value when given.
type boolSetter struct {
	p     *bool
	value bool
}

func (b boolSetter) String() string   { return "" }
func (b boolSetter) IsBoolFlag() bool { return true }
func (b boolSetter) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	if v {
		*b.p = b.value
	} else {
		*b.p = !b.value
	}
	return nil
}

// stringList collects the values of a repeated flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// parse parses args, allowing flags before, between and after the positional
// arguments, and checks the common flags. It prints the help and returns
// errHelp for -h/--help.
func (f *cmdFlags) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := f.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				f.printUsage()
				return nil, errHelp
			}
			msg := err.Error()
			if rest, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
				msg = "unknown flag " + rest
				for _, a := range args {
					if a == "-"+rest || strings.HasPrefix(a, "-"+rest+"=") {
						msg = "unknown flag " + strings.SplitN(a, "=", 2)[0]
						break
					}
				}
			}
			return nil, fmt.Errorf("%s: %s", f.command(), msg)
		}
		rest := f.fs.Args()
		if len(rest) == 0 {
			break
		}
		if rest[0] == "--" {
			pos = append(pos, rest[1:]...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if len(pos) < f.minArgs {
		return nil, fmt.Errorf("%s: missing argument (usage: zae-limiter %s)", f.command(), f.use)
	}
	if f.maxArgs >= 0 && len(pos) > f.maxArgs {
		return nil, fmt.Errorf("%s: unexpected argument %q", f.command(), pos[f.maxArgs])
	}
	c := &f.c.common
	c.explicit = map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) {
		name := fl.Name
		for long, short := range f.short {
			if short == name {
				name = long
			}
		}
		c.explicit[name] = true
	})
	if err := limiter.ValidateStackName(c.name); err != nil {
		var ve *limiter.ValidationError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("invalid --name %q: %s", c.name, ve.Reason)
		}
		return nil, err
	}
	if c.output != outputTable && c.output != outputJSON {
		return nil, fmt.Errorf("invalid --output %q: use table or json", c.output)
	}
	for _, fn := range f.post {
		fn()
	}
	return pos, nil
}

// command returns the command words of f.use ("entity create").
func (f *cmdFlags) command() string {
	var words []string
	for _, w := range strings.Fields(f.use) {
		if strings.ToUpper(w) == w {
			break
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}

func (f *cmdFlags) printUsage() {
	w := f.c.stdout
	fmt.Fprintf(w, "Usage: zae-limiter %s [FLAGS]\n\n%s\n\nFlags:\n", f.use, f.summary)
	for _, long := range f.order {
		if parts := strings.Split(long, "|"); len(parts) == 3 {
			fl := f.fs.Lookup(parts[0])
			fmt.Fprintf(w, "      --%s / --%s\n        \t%s (default --%s)\n", parts[0], parts[1], fl.Usage, parts[2])
			continue
		}
		fl := f.fs.Lookup(long)
		names := "    --" + long
		if s := f.short[long]; s != "" {
			names = "-" + s + ", --" + long
		}
		def := ""
		if fl.DefValue != "" && fl.DefValue != "false" && fl.DefValue != "0" {
			def = fmt.Sprintf(" (default %q)", fl.DefValue)
		}
		fmt.Fprintf(w, "  %s\n        \t%s%s\n", names, fl.Usage, def)
	}
}

// awsConfig loads the SDK configuration with --region and --endpoint-url.
func (c *cli) awsConfig() (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if c.common.region != "" {
		opts = append(opts, config.WithRegion(c.common.region))
	}
	cfg, err := config.LoadDefaultConfig(c.ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	if c.common.endpoint != "" {
		cfg.BaseEndpoint = aws.String(c.common.endpoint)
		if cfg.Region == "" {
			cfg.Region = "us-east-1" // any region works with a local endpoint
		}
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("no AWS region: pass --region or set AWS_REGION")
	}
	return cfg, nil
}

// dynamoDBEndpoint returns the DynamoDB endpoint the command talks to:
// --endpoint-url, else $AWS_ENDPOINT_URL_DYNAMODB, else $AWS_ENDPOINT_URL
// (the SDK reads the same variables); "" means AWS.
func (c *cli) dynamoDBEndpoint() string {
	for _, ep := range []string{c.common.endpoint, os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), os.Getenv("AWS_ENDPOINT_URL")} {
		if ep = strings.TrimSpace(ep); ep != "" {
			return ep
		}
	}
	return ""
}

// localEndpoint reports whether the command talks to a DynamoDB on this
// machine (a loopback address), i.e. DynamoDB Local.
func (c *cli) localEndpoint() bool { return isLoopback(c.dynamoDBEndpoint()) }

// isLoopback reports whether endpoint is a URL (or host:port) on a loopback
// address: localhost, 127.0.0.0/8 or ::1.
func isLoopback(endpoint string) bool {
	if endpoint == "" {
		return false
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = "http://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// dynamoDBClient returns the DynamoDB client of the command. For a local
// endpoint it is limiter.NewDynamoDBLocalClient (no AWS configuration
// needed; quiet on DynamoDB Local's bad checksums); else a client from the
// SDK's configuration with --region and --endpoint-url.
func (c *cli) dynamoDBClient(optFns ...func(*dynamodb.Options)) (*dynamodb.Client, aws.Config, error) {
	if ep := c.dynamoDBEndpoint(); isLoopback(ep) {
		cfg := limiter.DynamoDBLocalConfig(ep)
		if c.common.region != "" {
			cfg.Region = c.common.region
		}
		return limiter.NewDynamoDBLocalClient(ep, append([]func(*dynamodb.Options){func(o *dynamodb.Options) { o.Region = cfg.Region }}, optFns...)...), cfg, nil
	}
	cfg, err := c.awsConfig()
	if err != nil {
		return nil, aws.Config{}, err
	}
	client := dynamodb.NewFromConfig(cfg, append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		if c.common.endpoint != "" {
			// A DynamoDB-compatible server elsewhere may send error
			// responses whose CRC32 does not match, as DynamoDB Local
			// does; the SDK would log a warning for each.
			o.DisableValidateResponseChecksum = true
		}
	}}, optFns...)...)
	return client, cfg, nil
}

// table is what a command works with: the limiter for every entity, limit,
// audit and usage command (so that the library's validation, audit and
// bucket rules apply), and the repository for the namespace registry and
// the version record.
type table struct {
	*limiter.RateLimiter
	store.NamespaceRegistry
	repo *limiter.DynamoDBRepository
}

// newTable returns the table of repo. Its limiter reads stored limits
// afresh for every command (no config cache).
func newTable(repo *limiter.DynamoDBRepository, opts ...limiter.Option) *table {
	rl := limiter.New(repo, append([]limiter.Option{limiter.WithConfigCacheTTL(0)}, opts...)...)
	return &table{RateLimiter: rl, NamespaceRegistry: repo, repo: repo}
}

// openRepo opens the table, bound to --namespace (registered when new, as
// the library does). It never creates the table.
func (c *cli) openRepo() (*table, error) {
	client, cfg, err := c.dynamoDBClient()
	if err != nil {
		return nil, err
	}
	principal := ""
	if !c.readOnly {
		principal = c.principal(cfg)
	}
	repo, err := limiter.OpenDynamoDB(c.ctx, client, func(o *limiter.DynamoDBOptions) {
		o.Table = c.common.name
		o.Namespace = c.common.namespace
	})
	if err != nil {
		return nil, c.tableErr(err)
	}
	return newTable(repo, limiter.WithPrincipal(principal)), nil
}

// tableErr turns a missing table into a message naming the command that
// creates it: `local up` for DynamoDB Local, else `deploy`.
func (c *cli) tableErr(err error) error {
	var nf *types.ResourceNotFoundException
	if !errors.As(err, &nf) {
		return err
	}
	name := c.common.name
	if ep := c.dynamoDBEndpoint(); isLoopback(ep) {
		hint := "zae-limiter local up --name " + name
		if u, err := url.Parse(ep); err == nil && u.Port() != "" && u.Port() != strconv.Itoa(defaultLocalPort) {
			hint += " --port " + u.Port()
		}
		// A local endpoint may also be LocalStack or moto, where deploy works.
		return fmt.Errorf("table %q not found at %s (create it with: %s; on LocalStack: zae-limiter deploy --name %s)", name, ep, hint, name)
	}
	return fmt.Errorf("table %q not found (deploy it with: zae-limiter deploy --name %s)", name, name)
}

// parseConfirmed registers --yes/-y on a destructive command, parses args
// and refuses the command without --yes; what names the action from the
// positional arguments, e.g. "delete entity key-1".
func (f *cmdFlags) parseConfirmed(args []string, what func(pos []string) string) ([]string, error) {
	var yes bool
	f.boolean(&yes, "yes", "y", false, "confirm this destructive command")
	pos, err := f.parse(args)
	if err != nil {
		return nil, err
	}
	if err := requireYes(yes, what(pos)); err != nil {
		return nil, err
	}
	return pos, nil
}

// requireYes refuses a destructive command without --yes: there is no
// interactive confirmation (CI has no stdin).
func requireYes(yes bool, what string) error {
	if !yes {
		return fmt.Errorf("refusing to %s without --yes", what)
	}
	return nil
}

// errorMessage returns err as one short line: AWS errors are reduced to
// "context: Code: message" (or the innermost cause of a transport error).
func errorMessage(err error) string {
	var ec *exitCodeError
	if errors.As(err, &ec) {
		return oneLine(ec.msg)
	}
	s := err.Error()
	prefix := ""
	if i := strings.Index(s, "operation error "); i >= 0 {
		prefix = s[:i]
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		return oneLine(prefix + api.ErrorCode() + ": " + api.ErrorMessage())
	}
	var op *smithy.OperationError
	if errors.As(err, &op) {
		inner := op.Err
		for {
			next := errors.Unwrap(inner)
			if next == nil {
				break
			}
			inner = next
		}
		return oneLine(prefix + op.Service() + " " + op.Operation() + ": " + inner.Error())
	}
	return oneLine(s)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// principalTimeout bounds the STS call that names the caller.
const principalTimeout = 3 * time.Second

// principal returns who the audit events of this command name: $ZAEL_PRINCIPAL
// when set (an ARN or an identifier), else the caller's ARN from STS
// GetCallerIdentity, as the original CLI records (asked at the same
// endpoint as DynamoDB when --endpoint-url or $AWS_ENDPOINT_URL names one:
// LocalStack and moto answer). When STS does not answer (DynamoDB Local has
// no STS), or only DynamoDB's endpoint is local, it returns "" and the
// events name no one.
func (c *cli) principal(cfg aws.Config) string {
	if p := os.Getenv(envPrincipal); p != "" {
		return p
	}
	if c.localEndpoint() && c.common.endpoint == "" && os.Getenv("AWS_ENDPOINT_URL") == "" && os.Getenv("AWS_ENDPOINT_URL_STS") == "" {
		// Only DynamoDB's endpoint is local (as after `local up`): STS would
		// be AWS's, which must not be asked with local credentials.
		return ""
	}
	ctx, cancel := context.WithTimeout(c.ctx, principalTimeout)
	defer cancel()
	out, err := sts.NewFromConfig(cfg, func(o *sts.Options) { o.RetryMaxAttempts = 1 }).
		GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return ""
	}
	return aws.ToString(out.Arn)
}

// envPrincipal names the audit principal of CLI changes.
const envPrincipal = "ZAEL_PRINCIPAL"
