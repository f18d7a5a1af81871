package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	build "github.com/zaelimiter/limiter/cmd/internal/contender"
	"github.com/zaelimiter/limiter/internal/ddblocal"
)

// runContender is -contender: this tree's benchmark and an earlier
// commit's, each built as a program of its own, run in alternating rounds,
// each program one round (-rounds 1, a table of its own) per turn with
// args (the flags given, less -contender and -rounds), on a DynamoDB Local
// started for that turn alone (see freshServer). The report puts per concurrency and contender
// this tree's figures over the commit's: p50 and ops/s raw and normalised
// (the ratio of the two programs' ratios to their own floor in the same
// round, which cancels what the machine's load did between the turns), the
// CPU time per operation of the process normalised likewise (what the
// limiter's own code adds over the write, which the machine's load moves
// less than a latency), and the allocations per operation of each.
func runContender(ctx context.Context, stdout, stderr io.Writer, commit string, rounds int, args []string) error {
	b, err := build.New(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Fprintf(stderr, "floorbench: building this tree and %s\n", commit)
	cur, err := b.Current(ctx, "./cmd/internal/floorbench")
	if err != nil {
		return err
	}
	old, hash, err := b.Commit(ctx, commit, "./cmd/internal/floorbench", "./internal/floorbench")
	if err != nil {
		return err
	}
	bins := [2]string{cur, old}
	// rows[side][conc+" "+name] holds one row per round.
	rows := [2]map[string][]floorRow{{}, {}}
	var order []string
	stamp := time.Now().Unix()
	for r := range rounds {
		first, second := build.First(r)
		for _, i := range []int{first, second} {
			table := fmt.Sprintf("floorbench-%d-r%d-%s", stamp, r, [2]string{"now", "then"}[i])
			a := append([]string{"-rounds", "1", "-table", table}, args...)
			fmt.Fprintf(stderr, "floorbench: round %d of %d: %s\n", r+1, rounds, [2]string{"this tree", hash[:12]}[i])
			var out, errb bytes.Buffer
			err := freshServer(ctx, func(endpoint string) error {
				cmd := exec.CommandContext(ctx, bins[i], a...)
				cmd.Stdout, cmd.Stderr = &out, &errb
				cmd.Env = append(os.Environ(), ddblocal.EnvEndpoint+"="+endpoint)
				return cmd.Run()
			})
			if err != nil {
				return fmt.Errorf("%s: %w: %s", bins[i], err, strings.TrimSpace(errb.String()))
			}
			for _, fr := range parseFloorReport(out.String()) {
				k := fr.key()
				if i == 0 && r == 0 {
					order = append(order, k)
				}
				rows[i][k] = append(rows[i][k], fr)
			}
		}
	}
	fmt.Fprintf(stdout, "contender %s (%s): %d alternating rounds, each program one round per turn on a DynamoDB Local of its own\n", commit, hash[:12], rounds)
	fmt.Fprintf(stdout, "now/then: this tree's value ÷ the commit's, median [min–max] of the rounds; normalised: the ratio of their ratios to their own floor in the round\n\n")
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "c\tcontender\tp50 now\tp50 then\tp50 now/then\tnormalised\tops/s now/then\tnormalised\tCPU/op normalised\tallocs/op now\tthen\t")
	for _, k := range order {
		now, then := rows[0][k], rows[1][k]
		if len(then) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t(the contender has no such line)\t\t\t\t\t\t\t\t\t\n", now[0].conc, now[0].name)
			continue
		}
		n := min(len(now), len(then))
		var p50, p50n, ops, opsn, cpun, an, at, pn, pt []float64
		for j := range n {
			p50 = append(p50, float64(now[j].p50)/float64(then[j].p50))
			p50n = append(p50n, now[j].p50Ratio/then[j].p50Ratio)
			ops = append(ops, now[j].ops/then[j].ops)
			opsn = append(opsn, now[j].opsRatio/then[j].opsRatio)
			if then[j].cpuRatio > 0 {
				cpun = append(cpun, now[j].cpuRatio/then[j].cpuRatio)
			}
			an = append(an, now[j].allocs)
			at = append(at, then[j].allocs)
			pn = append(pn, float64(now[j].p50))
			pt = append(pt, float64(then[j].p50))
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.0f\t\n", now[0].conc, now[0].name,
			time.Duration(med(pn)).Round(time.Microsecond), time.Duration(med(pt)).Round(time.Microsecond),
			spread(p50), spread(p50n), spread(ops), spread(opsn), spread(cpun), med(an), med(at))
	}
	return tw.Flush()
}

// freshServer runs fn with the endpoint of a DynamoDB Local started for
// it alone, and stops that server when fn returns.
//
// One server for every turn would slow each turn more than the last, and
// the second program of a round more than the first: DynamoDB Local keeps
// the stream records of every table in one SQLite table of the server
// (the limiter's tables have a stream), drops them only after 24 hours,
// deleted tables' too, and for every write to a table with a stream looks
// up the oldest record of that table's stream by a scan in sequence order,
// which passes every record written before that table's first. A table
// created after 10,000 writes to others pays that scan on each of its own
// writes (about 2 ms more per 10,000 at c=1 on 2 cores); the turns of a
// 3-round run write some 6,000 each, so by the last turn a write cost
// several times the first turn's and c=32 operations ran past their
// deadline. On a server of its own each turn's table is the first, as in
// a run without -contender.
//
// When $ZAEL_DYNAMODB_ENDPOINT names a server, every turn runs on it and
// the turns slow as said.
func freshServer(ctx context.Context, fn func(endpoint string) error) error {
	start, cancel := context.WithTimeout(ctx, ddblocal.StartTimeout)
	srv, err := ddblocal.Start(start)
	cancel()
	if err != nil {
		return err
	}
	defer srv.Close()
	return fn(srv.Endpoint())
}

// floorRow is one contender's line of a one-round report.
type floorRow struct {
	conc, name       string
	p50              time.Duration
	p50Ratio, ops    float64
	opsRatio, allocs float64
	cpuRatio         float64 // 0 when the line has none
}

func (f floorRow) key() string { return f.conc + " " + f.name }

// parseFloorReport reads the rows of report's tables: after a line
// "c=N: ...", the header, then contender, floor, p50, p50 ratio and its
// range, ops/s, its ratio and range, allocs/op, allocs over the floor,
// CPU/op, its ratio and range, until a blank line.
func parseFloorReport(out string) []floorRow {
	var rows []floorRow
	conc := ""
	header := false
	for _, line := range strings.Split(out, "\n") {
		if c, _, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(c, "c=") && !strings.Contains(c, " ") {
			conc, header = c, true
			continue
		}
		f := strings.Fields(line)
		if conc == "" || len(f) == 0 {
			conc = ""
			continue
		}
		if header {
			header = false
			continue
		}
		if len(f) < 10 {
			continue
		}
		p50, err1 := time.ParseDuration(f[2])
		p50r, err2 := strconv.ParseFloat(strings.TrimSuffix(f[3], "×"), 64)
		ops, err3 := strconv.ParseFloat(f[5], 64)
		opsr, err4 := strconv.ParseFloat(strings.TrimSuffix(f[6], "×"), 64)
		allocs, err5 := strconv.ParseFloat(f[8], 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil {
			continue
		}
		row := floorRow{conc: conc, name: f[0], p50: p50, p50Ratio: p50r, ops: ops, opsRatio: opsr, allocs: allocs}
		if len(f) >= 12 {
			row.cpuRatio, _ = strconv.ParseFloat(strings.TrimSuffix(f[11], "×"), 64)
		}
		rows = append(rows, row)
	}
	return rows
}

func med(v []float64) float64 {
	m, _, _ := median(v)
	return m
}

// spread formats the median and range of v ("–" when v is empty).
func spread(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return fmt.Sprintf("%.2f× [%.2f–%.2f]", med(s), s[0], s[len(s)-1])
}
