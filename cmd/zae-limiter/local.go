package main

// `zae-limiter local up|down|status|env|aggregator`: a local development
// stack on DynamoDB Local, without Docker. `up` fetches
// DynamoDB Local when needed, starts it with -sharedDb (every access key
// sees the same tables) in the background, creates the table with its
// stream, starts the aggregator on that stream in the background, and
// prints the environment variables that point programs, the CLI and the
// aggregator runner at it. Each `up` keeps its state under DIR/PORT: pid
// files, logs, the state record and (unless --in-memory) the database.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/aggregator"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// defaultLocalPort is DynamoDB Local's usual port.
const defaultLocalPort = 8000

// envLocalDir overrides the default state directory of `local`.
const envLocalDir = "ZAEL_LOCAL_DIR"

// localFlags are the flags every `local` subcommand takes.
type localFlags struct {
	port int
	dir  string
}

func (l *localFlags) register(f *command) {
	f.integer(&l.port, "port", "p", defaultLocalPort, "DynamoDB Local's port on 127.0.0.1")
	f.str(&l.dir, "dir", "", "", "state directory: pid files, logs and data under DIR/PORT (default $ZAEL_LOCAL_DIR, else zae-limiter/local in the user's cache directory)")
}

// localPaths are the files of one local instance.
type localPaths struct {
	base, state, data string
}

// paths resolves the instance directory of the flags.
func (l *localFlags) paths() (localPaths, error) {
	if l.port <= 0 || l.port > 65535 {
		return localPaths{}, fmt.Errorf("invalid --port %d", l.port)
	}
	dir := l.dir
	if dir == "" {
		dir = os.Getenv(envLocalDir)
	}
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return localPaths{}, fmt.Errorf("no state directory (pass --dir): %w", err)
		}
		dir = filepath.Join(cache, "zae-limiter", "local")
	}
	base := filepath.Join(dir, strconv.Itoa(l.port))
	return localPaths{base: base, state: filepath.Join(base, "state.json"), data: filepath.Join(base, "data")}, nil
}

func (l *localFlags) endpoint() string { return "http://127.0.0.1:" + strconv.Itoa(l.port) }

// dynamoDBSpec is DynamoDB Local's process.
func (p localPaths) dynamoDBSpec(port int) procSpec {
	return procSpec{name: "dynamodb-local", marks: []string{"DynamoDBLocal.jar", "-port", strconv.Itoa(port)},
		pidFile: filepath.Join(p.base, "dynamodb-local.pid")}
}

// aggregatorSpec is the aggregator process of one table.
func (p localPaths) aggregatorSpec(table, endpoint string) procSpec {
	return procSpec{name: "aggregator " + table, marks: []string{"local", "aggregator", endpoint, table},
		pidFile: filepath.Join(p.base, "aggregator-"+table+".pid")}
}

// localState is the state record of an instance (state.json).
type localState struct {
	Endpoint  string `json:"endpoint"`
	Port      int    `json:"port"`
	Region    string `json:"region"`
	Namespace string `json:"namespace"`
	// Table is the table of the last `up`; Tables every table `up` created.
	Table  string   `json:"table"`
	Tables []string `json:"tables"`
	// Started is false when `up` found DynamoDB Local already answering
	// and used it: `down` then leaves it running.
	Started  bool   `json:"started"`
	InMemory bool   `json:"in_memory"`
	DataDir  string `json:"data_dir,omitempty"`
	Jar      string `json:"jar,omitempty"`
}

func readState(path string) (localState, bool, error) {
	var st localState
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, false, fmt.Errorf("state %s: %w", path, err)
	}
	return st, true, nil
}

func writeState(path string, st localState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// localEnv returns the environment variables that point SDK programs, the
// CLI and the aggregator runner at the instance, in print order.
func localEnv(st localState) [][2]string {
	return [][2]string{
		{"AWS_ENDPOINT_URL_DYNAMODB", st.Endpoint},
		{"AWS_ENDPOINT_URL_DYNAMODB_STREAMS", st.Endpoint},
		{"AWS_ACCESS_KEY_ID", ddbschema.LocalAccessKey},
		{"AWS_SECRET_ACCESS_KEY", ddbschema.LocalAccessKey},
		{"AWS_REGION", st.Region},
		{"AWS_DEFAULT_REGION", st.Region},
		{ddbschema.EnvStack, st.Table},
		{ddbschema.EnvNamespace, st.Namespace},
	}
}

// formatEnv formats variables for a shell: eval (bash/zsh `export`), direnv
// or powershell.
func formatEnv(vars [][2]string, format string) (string, error) {
	switch format {
	case "eval", "direnv", "powershell":
	default:
		return "", fmt.Errorf("invalid --format %q: use eval, direnv or powershell", format)
	}
	var b strings.Builder
	for _, kv := range vars {
		switch format {
		case "eval":
			fmt.Fprintf(&b, "export %s=%s\n", kv[0], shellQuote(kv[1]))
		case "direnv":
			fmt.Fprintf(&b, "%s=%s\n", kv[0], shellQuote(kv[1]))
		default:
			fmt.Fprintf(&b, "$env:%s = \"%s\"\n", kv[0], strings.ReplaceAll(kv[1], `"`, "`\""))
		}
	}
	return b.String(), nil
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

const localEnvHint = `To configure your shell:
  eval "$(zae-limiter local env%[1]s)"                 # bash/zsh
  zae-limiter local env%[1]s --format direnv > .envrc  # direnv
`

func portArg(port int) string {
	if port == defaultLocalPort {
		return ""
	}
	return " --port " + strconv.Itoa(port)
}

func cmdLocalUp(c *cli) *command {
	f := c.newFlags("local up", "Start DynamoDB Local (fetched on first use) with -sharedDb in the background, create the table with its stream, start the aggregator on it, and print the environment variables that point programs and the CLI at it. Running it again reuses what runs.", 0, 0, false)
	var lf localFlags
	var inMemory, withAggregator bool
	var format string
	var interval time.Duration
	lf.register(f)
	f.boolean(&inMemory, "in-memory", "", false, "keep the data in memory (lost on down) instead of DIR/PORT/data")
	f.pair(&withAggregator, "aggregator", "no-aggregator", true, "run the aggregator on the table's stream (usage snapshots, refills)")
	f.duration(&interval, "interval", "", aggregator.DefaultPollInterval, "the aggregator's pause between stream polls")
	f.str(&format, "format", "f", "eval", "output format of the variables: eval, direnv or powershell")
	f.run = func([]string) error {
		if _, err := formatEnv(nil, format); err != nil {
			return err
		}
		p, err := lf.paths()
		if err != nil {
			return err
		}
		if err := os.MkdirAll(p.base, 0o755); err != nil {
			return err
		}
		prev, _, err := readState(p.state)
		if err != nil {
			return err
		}
		st := localState{Endpoint: lf.endpoint(), Port: lf.port, Region: firstNonEmpty(c.common.region, ddbschema.LocalRegion),
			Namespace: c.common.namespace, Table: c.common.name, Started: true, InMemory: inMemory, Tables: prev.Tables}
		if err := c.startDynamoDBLocal(p, &lf, &st, prev); err != nil {
			return err
		}
		if err := c.createLocalTable(st); err != nil {
			return err
		}
		if !containsArg(st.Tables, st.Table) {
			st.Tables = append(st.Tables, st.Table)
		}
		if err := writeState(p.state, st); err != nil {
			return err
		}
		if withAggregator {
			if err := c.startLocalAggregator(p, st, interval); err != nil {
				return err
			}
		}
		out, _ := formatEnv(localEnv(st), format)
		c.printf("%s", out)
		fmt.Fprintf(c.stderr, "\n"+localEnvHint, portArg(lf.port))
		return nil
	}
	return f
}

// startDynamoDBLocal makes sure DynamoDB Local answers at the instance's
// port: the one a previous `up` started, one that already answers there
// (used, not owned), or a new process.
func (c *cli) startDynamoDBLocal(p localPaths, lf *localFlags, st *localState, prev localState) error {
	spec := p.dynamoDBSpec(lf.port)
	pid, err := spec.running()
	if err != nil {
		return fmt.Errorf("dynamodb-local: %w (remove %s if it is stale)", err, spec.pidFile)
	}
	if pid != 0 {
		st.Started, st.InMemory, st.DataDir, st.Jar = true, prev.InMemory, prev.DataDir, prev.Jar
		if err := waitHTTP(c.ctx, st.Endpoint, pid, localStartTimeout); err != nil {
			return fmt.Errorf("DynamoDB Local (pid %d): %w", pid, err)
		}
		fmt.Fprintf(c.stderr, "DynamoDB Local (pid %d) already running at %s\n", pid, st.Endpoint)
		return nil
	}
	quick, cancel := context.WithTimeout(c.ctx, time.Second)
	busy := waitHTTP(quick, st.Endpoint, 0, time.Second) == nil
	cancel()
	if busy {
		st.Started, st.InMemory = false, false
		fmt.Fprintf(c.stderr, "something already answers at %s: using it as DynamoDB Local (not started here, so `local down` leaves it running)\n", st.Endpoint)
		return nil
	}
	dir, err := ddblocal.InstallDir()
	if err != nil {
		return err
	}
	jar, err := ddblocal.Fetch(c.ctx, dir, c.stderr)
	if err != nil {
		return err
	}
	java, err := ddblocal.JavaBinary()
	if err != nil {
		return fmt.Errorf("%w (DynamoDB Local needs Java 17 or newer)", err)
	}
	javaArgs := []string{"-Djava.library.path=" + filepath.Join(filepath.Dir(jar), "DynamoDBLocal_lib"), "-jar", jar,
		"-sharedDb", "-disableTelemetry", "-port", strconv.Itoa(lf.port)}
	if st.InMemory {
		javaArgs = append(javaArgs, "-inMemory")
	} else {
		if err := os.MkdirAll(p.data, 0o755); err != nil {
			return err
		}
		st.DataDir = p.data
		javaArgs = append(javaArgs, "-dbPath", p.data)
	}
	st.Jar = jar
	cmd := exec.Command(java, javaArgs...)
	cmd.Dir = filepath.Dir(jar)
	logPath := filepath.Join(p.base, "dynamodb-local.log")
	begin := time.Now()
	proc, err := spec.startDetached(cmd, logPath)
	if err != nil {
		return err
	}
	pid = proc.Pid
	_ = proc.Release()
	if err := waitHTTP(c.ctx, st.Endpoint, pid, localStartTimeout); err != nil {
		_, _ = spec.stop(context.WithoutCancel(c.ctx))
		return fmt.Errorf("DynamoDB Local on port %d: %w: %s", lf.port, err, oneLine(logTail(logPath, 5)))
	}
	where := "data in " + p.data
	if st.InMemory {
		where = "in memory"
	}
	fmt.Fprintf(c.stderr, "DynamoDB Local (pid %d) at %s, %s, ready in %v (log %s)\n",
		pid, st.Endpoint, where, time.Since(begin).Round(10*time.Millisecond), logPath)
	return nil
}

// createLocalTable creates the table with its stream (a no-op when it
// exists) and registers the namespace.
func (c *cli) createLocalTable(st localState) error {
	client := limiter.NewDynamoDBLocalClient(st.Endpoint, func(o *dynamodb.Options) { o.Region = st.Region })
	repo, err := limiter.OpenDynamoDB(c.ctx, client, func(o *limiter.DynamoDBOptions) {
		o.Table = st.Table
		o.Namespace = st.Namespace
		o.CreateTable = true
	})
	if err != nil {
		return fmt.Errorf("create table %s: %w", st.Table, err)
	}
	fmt.Fprintf(c.stderr, "table %s (with its stream) ready, namespace %s (%s)\n", repo.Table(), repo.NamespaceName(), repo.NamespaceID())
	return nil
}

// startLocalAggregator runs `zae-limiter local aggregator` for the table in
// the background, unless it runs already.
func (c *cli) startLocalAggregator(p localPaths, st localState, interval time.Duration) error {
	spec := p.aggregatorSpec(st.Table, st.Endpoint)
	pid, err := spec.running()
	if err != nil {
		return fmt.Errorf("aggregator: %w (remove %s if it is stale)", err, spec.pidFile)
	}
	if pid != 0 {
		fmt.Fprintf(c.stderr, "aggregator (pid %d) already polling the stream of %s\n", pid, st.Table)
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("aggregator: %w", err)
	}
	if strings.HasSuffix(exe, ".test") {
		return errors.New("aggregator: cannot run it from a test binary (pass --no-aggregator)")
	}
	// From the end of the stream: a restarted runner must not count the
	// records its predecessor counted (it keeps no checkpoint).
	cmd := exec.Command(exe, "local", "aggregator", "--latest", "--endpoint-url", st.Endpoint, "--region", st.Region,
		"-n", st.Table, "--interval", interval.String())
	logPath := filepath.Join(p.base, "aggregator-"+st.Table+".log")
	proc, err := spec.startDetached(cmd, logPath)
	if err != nil {
		return err
	}
	pid = proc.Pid
	_ = proc.Release()
	// A runner that cannot start (a bad table, say) exits at once.
	time.Sleep(300 * time.Millisecond)
	if !processAlive(pid) {
		_ = os.Remove(spec.pidFile)
		return fmt.Errorf("aggregator exited: %s", oneLine(logTail(logPath, 5)))
	}
	fmt.Fprintf(c.stderr, "aggregator (pid %d) polling the stream of %s every %v (log %s)\n", pid, st.Table, interval, logPath)
	return nil
}

func cmdLocalDown(c *cli) *command {
	f := c.newFlags("local down", "Stop the aggregators and the DynamoDB Local that `local up` started on this port; processes it did not start are left alone.", 0, 0, false)
	var lf localFlags
	var purge bool
	lf.register(f)
	f.boolean(&purge, "purge", "", false, "also delete the data directory (the tables)")
	f.run = func([]string) error {
		p, err := lf.paths()
		if err != nil {
			return err
		}
		st, ok, err := readState(p.state)
		if err != nil {
			return err
		}
		endpoint := lf.endpoint()
		var errs []error
		stopped := 0
		aggs, _ := filepath.Glob(filepath.Join(p.base, "aggregator-*.pid"))
		for _, pidFile := range aggs {
			table := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(pidFile), "aggregator-"), ".pid")
			spec := p.aggregatorSpec(table, endpoint)
			if done, err := spec.stop(c.ctx); err != nil {
				errs = append(errs, err)
			} else if done {
				stopped++
				fmt.Fprintf(c.stderr, "stopped the aggregator of %s\n", table)
			}
		}
		spec := p.dynamoDBSpec(lf.port)
		if done, err := spec.stop(c.ctx); err != nil {
			errs = append(errs, err)
		} else if done {
			stopped++
			fmt.Fprintf(c.stderr, "stopped DynamoDB Local at %s\n", endpoint)
		} else if ok && !st.Started {
			fmt.Fprintf(c.stderr, "DynamoDB Local at %s was not started by `local up`: left running\n", endpoint)
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		if err := os.Remove(p.state); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if purge {
			if err := os.RemoveAll(p.data); err != nil {
				return err
			}
			fmt.Fprintf(c.stderr, "deleted %s\n", p.data)
		}
		if stopped == 0 {
			c.printf("Nothing to stop on port %d\n", lf.port)
			return nil
		}
		c.printf("Stopped %d process(es) on port %d\n", stopped, lf.port)
		return nil
	}
	return f
}

// localStatusJSON is the output of `local status -o json`.
type localStatusJSON struct {
	Endpoint      string            `json:"endpoint"`
	Answers       bool              `json:"answers"`
	DynamoDBLocal *procStatusJSON   `json:"dynamodb_local"`
	Aggregators   []procStatusJSON  `json:"aggregators"`
	Tables        []tableStatusJSON `json:"tables"`
	State         *localState       `json:"state"`
}

type procStatusJSON struct {
	Name    string `json:"name"`
	PID     int    `json:"pid"`
	Running bool   `json:"running"`
	Problem string `json:"problem,omitempty"`
}

type tableStatusJSON struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Stream bool   `json:"stream"`
}

func cmdLocalStatus(c *cli) *command {
	f := c.newFlags("local status", "Show what `local up` runs on this port: processes, endpoint and tables.", 0, 0, true)
	var lf localFlags
	lf.register(f)
	f.run = func([]string) error {
		p, err := lf.paths()
		if err != nil {
			return err
		}
		st, ok, err := readState(p.state)
		if err != nil {
			return err
		}
		out := localStatusJSON{Endpoint: lf.endpoint(), Aggregators: []procStatusJSON{}, Tables: []tableStatusJSON{}}
		if ok {
			out.State = &st
		}
		procStatus := func(spec procSpec) procStatusJSON {
			pid, err := spec.running()
			ps := procStatusJSON{Name: spec.name, PID: pid, Running: pid != 0 && err == nil}
			if err != nil {
				ps.Problem = err.Error()
			}
			return ps
		}
		ds := procStatus(p.dynamoDBSpec(lf.port))
		out.DynamoDBLocal = &ds
		aggs, _ := filepath.Glob(filepath.Join(p.base, "aggregator-*.pid"))
		for _, pidFile := range aggs {
			table := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(pidFile), "aggregator-"), ".pid")
			out.Aggregators = append(out.Aggregators, procStatus(p.aggregatorSpec(table, out.Endpoint)))
		}
		ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		defer cancel()
		client := limiter.NewDynamoDBLocalClient(out.Endpoint)
		if tables, err := client.ListTables(ctx, &dynamodb.ListTablesInput{}); err == nil {
			out.Answers = true
			for _, name := range tables.TableNames {
				ts := tableStatusJSON{Name: name}
				if d, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}); err == nil && d.Table != nil {
					ts.Status = string(d.Table.TableStatus)
					ts.Stream = d.Table.StreamSpecification != nil && aws.ToBool(d.Table.StreamSpecification.StreamEnabled)
				}
				out.Tables = append(out.Tables, ts)
			}
		}
		if c.jsonOutput() {
			return c.writeJSON(out)
		}
		state := func(ps procStatusJSON) string {
			switch {
			case ps.Problem != "":
				return "unknown: " + ps.Problem
			case ps.Running:
				return fmt.Sprintf("running (pid %d)", ps.PID)
			}
			return "not running"
		}
		answers := "no answer"
		if out.Answers {
			answers = "answers"
		}
		rows := [][]string{{"Endpoint:", out.Endpoint + " (" + answers + ")"}, {"DynamoDB Local:", state(ds)}}
		if ok && !st.Started {
			rows[1][1] += ", not started by local up"
		}
		for _, a := range out.Aggregators {
			rows = append(rows, []string{"Aggregator:", strings.TrimPrefix(a.Name, "aggregator ") + ": " + state(a)})
		}
		if ok {
			data := "in memory"
			if !st.InMemory {
				data = dash(st.DataDir)
			}
			rows = append(rows, []string{"Data:", data}, []string{"State:", p.base})
		}
		for _, t := range out.Tables {
			stream := "no stream"
			if t.Stream {
				stream = "stream on"
			}
			rows = append(rows, []string{"Table:", t.Name + " (" + t.Status + ", " + stream + ")"})
		}
		if err := c.kv(rows); err != nil {
			return err
		}
		if ds.Running || out.Answers {
			fmt.Fprintf(c.stdout, "\n"+localEnvHint, portArg(lf.port))
		}
		return nil
	}
	return f
}

func cmdLocalEnv(c *cli) *command {
	f := c.newFlags("local env", "Print the environment variables that point programs, the CLI and the aggregator runner at the DynamoDB Local of `local up` (the table of its last run unless --name is given).", 0, 0, false)
	var lf localFlags
	var format string
	lf.register(f)
	f.str(&format, "format", "f", "eval", "output format: eval, direnv or powershell")
	f.run = func([]string) error {
		p, err := lf.paths()
		if err != nil {
			return err
		}
		st, ok, err := readState(p.state)
		if err != nil {
			return err
		}
		if !ok {
			st = localState{Endpoint: lf.endpoint(), Region: ddbschema.LocalRegion, Table: c.common.name, Namespace: c.common.namespace}
		}
		if c.common.explicit["name"] {
			st.Table = c.common.name
		}
		if c.common.explicit["namespace"] {
			st.Namespace = c.common.namespace
		}
		if c.common.explicit["region"] {
			st.Region = c.common.region
		}
		out, err := formatEnv(localEnv(st), format)
		if err != nil {
			return err
		}
		c.printf("%s", out)
		return nil
	}
	return f
}

func cmdLocalAggregator(c *cli) *command {
	f := c.newFlags("local aggregator", "Run the aggregator on the table's stream in the foreground (what `local up` starts in the background): usage snapshots, refills, shard doubling. Reads SNAPSHOT_WINDOWS and SNAPSHOT_TTL_DAYS like the Lambda.", 0, 0, false)
	var once, latest bool
	var interval time.Duration
	f.boolean(&once, "once", "", false, "poll the stream once, print a summary and exit")
	f.boolean(&latest, "latest", "", false, "start at the end of the stream instead of its beginning")
	f.duration(&interval, "interval", "", aggregator.DefaultPollInterval, "pause between polls")
	f.run = func([]string) error {
		endpoint := firstNonEmpty(c.dynamoDBEndpoint(), "http://127.0.0.1:"+strconv.Itoa(defaultLocalPort))
		cfg, err := aggregator.LoadConfig(os.Getenv)
		if err != nil {
			return err
		}
		awsCfg := ddbschema.LocalConfig(endpoint)
		if c.common.region != "" {
			awsCfg.Region = c.common.region
		}
		c.common.endpoint = endpoint // for the missing-table hint
		client := limiter.NewDynamoDBLocalClient(endpoint, func(o *dynamodb.Options) { o.Region = awsCfg.Region })
		if _, err := client.DescribeTable(c.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(c.common.name)}); err != nil {
			return c.tableErr(err)
		}
		logger := slog.New(slog.NewTextHandler(c.stderr, nil))
		proc, err := aggregator.NewProcessor(client, c.common.name, cfg.Options(), func(o *aggregator.Options) {
			o.Logger = logger
			o.ArchiveBucket = "" // no S3 here
		})
		if err != nil {
			return err
		}
		runner := aggregator.NewRunner(dynamodbstreams.NewFromConfig(awsCfg), c.common.name, proc, func(o *aggregator.RunnerOptions) {
			o.PollInterval = interval
			o.Logger = logger
			if latest {
				o.StartingPosition = "LATEST"
			}
		})
		if once {
			res, err := runner.Poll(c.ctx)
			if err != nil {
				return err
			}
			c.printf("%d records, %d snapshot writes, %d refills, %d shard doublings, %d shard items, %d dropped\n",
				res.Processed, res.SnapshotsUpdated, res.RefillsWritten, res.ShardsDoubled, res.ShardItemsCreated, len(res.Failures))
			return nil
		}
		// Fail at once on a table without a stream, rather than log it forever.
		if _, err := runner.Poll(c.ctx); err != nil {
			return err
		}
		logger.Info("aggregator polling", "endpoint", endpoint, "table", c.common.name, "interval", interval.String())
		if err := runner.Run(c.ctx); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}
	return f
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
