package main

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/zaelimiter/limiter/internal/ddbschema"
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
		cfg := ddbschema.LocalConfig(ep)
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
func newTable(repo *limiter.DynamoDBRepository, opts ...func(*limiter.Options)) *table {
	rl := limiter.New(repo, append([]func(*limiter.Options){func(o *limiter.Options) { o.ConfigCacheTTL = 0 }}, opts...)...)
	return &table{RateLimiter: rl, NamespaceRegistry: repo, repo: repo}
}

// openRepo opens the table, bound to --namespace (registered when new, as
// the library does). It never creates the table.
func (c *cli) openRepo() (*table, error) {
	client, cfg, err := c.dynamoDBClient()
	if err != nil {
		return nil, err
	}
	repo, err := limiter.OpenDynamoDB(c.ctx, client, func(o *limiter.DynamoDBOptions) {
		o.Table = c.common.name
		o.Namespace = c.common.namespace
	})
	if err != nil {
		return nil, c.tableErr(err)
	}
	principal := "" // asked once the table answered: an endpoint that does not fails at once
	if !c.readOnly {
		principal = c.principal(cfg)
	}
	return newTable(repo, func(o *limiter.Options) { o.Principal = principal }), nil
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

// errorMessage returns err as one short line: the library's account of an
// unreachable or failing store as it is (it names the endpoint and what to
// check), other AWS errors reduced to "context: Code: message" (or the
// innermost cause of a transport error).
func errorMessage(err error) string {
	var ec *exitCodeError
	if errors.As(err, &ec) {
		return oneLine(ec.msg)
	}
	s := err.Error()
	if errors.Is(err, limiter.ErrUnavailable) && strings.HasPrefix(s, "limiter: ") {
		return oneLine(s)
	}
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
// GetCallerIdentity (asked at the same
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

// store returns the DynamoDB store itself, whose optional capabilities
// (listings by page, usage snapshots by page) the commands use.
func (t *table) store() store.Repository { return t.repo.Unwrap() }
