package policy

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// call is one compiled rule: a rule with at most one value per condition.
// A rule with "in {A, B}" becomes one call per value (the values are ORed).
type call struct {
	rule Rule
	args []*configs.Arg
}

// key orders calls deterministically, independent of file order.
func (c call) key() string {
	var b strings.Builder
	b.WriteString(c.rule.Syscall)
	for _, a := range c.args {
		fmt.Fprintf(&b, " %d:%d:%016x:%016x", a.Index, a.Op, a.Value, a.ValueTwo)
	}
	return b.String()
}

// calls expands the rules that exist on arch, sorted by syscall name and
// argument values so that the same policy always compiles to the same output.
func (p *Policy) calls(arch archInfo) []call {
	var out []call
	for _, r := range p.Rules {
		if _, ok := syscallNumber(r.Syscall, arch); !ok {
			continue
		}
		variants := [][]*configs.Arg{nil}
		for _, c := range r.Conds {
			var next [][]*configs.Arg
			for _, base := range variants {
				for _, v := range c.Values {
					args := append(append([]*configs.Arg(nil), base...), condArg(c, v))
					next = append(next, args)
				}
			}
			variants = next
		}
		for _, args := range variants {
			out = append(out, call{rule: r, args: args})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// condArg converts one condition value to libcontainer's form. libseccomp's
// masked comparison takes the mask first and the wanted value second.
func condArg(c Cond, v uint64) *configs.Arg {
	if c.HasMask {
		return &configs.Arg{Index: c.Arg, Value: c.Mask, ValueTwo: v, Op: configs.MaskEqualTo}
	}
	ops := map[Op]configs.Operator{
		OpEq: configs.EqualTo, OpNe: configs.NotEqualTo, OpLt: configs.LessThan,
		OpLe: configs.LessThanOrEqualTo, OpGt: configs.GreaterThan, OpGe: configs.GreaterThanOrEqualTo,
	}
	return &configs.Arg{Index: c.Arg, Value: v, Op: ops[c.Op]}
}

// containerAction maps an action to libcontainer's.
func containerAction(a Action) (configs.Action, *uint) {
	switch a.Kind {
	case ActAllow:
		return configs.Allow, nil
	case ActErrno:
		e := uint(a.Errno)
		return configs.Errno, &e
	}
	return configs.KillProcess, nil
}

// nativeArch returns the host architecture, which the policy must list.
func (p *Policy) nativeArch() (archInfo, error) {
	name, err := NativeArch()
	if err != nil {
		return archInfo{}, err
	}
	if !p.HasArch(name) {
		return archInfo{}, fmt.Errorf("policy %s: not reviewed for this host's architecture %s (header lists %s)",
			p.Name, name, strings.Join(p.Arches, ", "))
	}
	return lookupArch(name)
}

// Libcontainer compiles the policy to libcontainer's seccomp configuration
// for the host architecture. Rules are sorted by syscall and arguments; rules
// whose action equals the default are kept (runc skips them when it builds
// the filter, but counts them when it places its ENOSYS tail).
func (p *Policy) Libcontainer() (*configs.Seccomp, error) {
	arch, err := p.nativeArch()
	if err != nil {
		return nil, err
	}
	return p.libcontainerFor(arch), nil
}

func (p *Policy) libcontainerFor(arch archInfo) *configs.Seccomp {
	def, defErrno := containerAction(p.DefaultAction)
	cfg := &configs.Seccomp{
		DefaultAction:   def,
		DefaultErrnoRet: defErrno,
		Architectures:   []string{arch.container},
	}
	for _, c := range p.calls(arch) {
		act, errno := containerAction(c.rule.Action)
		cfg.Syscalls = append(cfg.Syscalls, &configs.Syscall{
			Name: c.rule.Syscall, Action: act, ErrnoRet: errno, Args: c.args,
		})
	}
	return cfg
}

// ociAction maps an action to the runtime-spec's.
func ociAction(a Action) (specs.LinuxSeccompAction, *uint) {
	switch a.Kind {
	case ActAllow:
		return specs.ActAllow, nil
	case ActErrno:
		e := uint(a.Errno)
		return specs.ActErrno, &e
	}
	return specs.ActKillProcess, nil
}

var ociOps = map[configs.Operator]specs.LinuxSeccompOperator{
	configs.EqualTo: specs.OpEqualTo, configs.NotEqualTo: specs.OpNotEqual,
	configs.LessThan: specs.OpLessThan, configs.LessThanOrEqualTo: specs.OpLessEqual,
	configs.GreaterThan: specs.OpGreaterThan, configs.GreaterThanOrEqualTo: specs.OpGreaterEqual,
	configs.MaskEqualTo: specs.OpMaskedEqual,
}

// OCI compiles the policy to the OCI runtime-spec seccomp section for the
// host architecture (runsc --oci-seccomp). It carries the same rules, in the
// same order, as Libcontainer.
func (p *Policy) OCI() (*specs.LinuxSeccomp, error) {
	arch, err := p.nativeArch()
	if err != nil {
		return nil, err
	}
	def, defErrno := ociAction(p.DefaultAction)
	out := &specs.LinuxSeccomp{
		DefaultAction:   def,
		DefaultErrnoRet: defErrno,
		Architectures:   []specs.Arch{arch.oci},
	}
	for _, c := range p.calls(arch) {
		act, errno := ociAction(c.rule.Action)
		sc := specs.LinuxSyscall{Names: []string{c.rule.Syscall}, Action: act, ErrnoRet: errno}
		for _, a := range c.args {
			sc.Args = append(sc.Args, specs.LinuxSeccompArg{Index: a.Index, Value: a.Value, ValueTwo: a.ValueTwo, Op: ociOps[a.Op]})
		}
		out.Syscalls = append(out.Syscalls, sc)
	}
	return out, nil
}

// dockerProfile is Docker's seccomp profile JSON (docker run --security-opt
// seccomp=FILE; moby/profiles' seccomp.Seccomp). Export writes it and import
// reads it, strictly: every field Docker knows is here, nothing else.
type dockerProfile struct {
	DefaultAction    specs.LinuxSeccompAction `json:"defaultAction"`
	DefaultErrnoRet  *uint                    `json:"defaultErrnoRet,omitempty"`
	ListenerPath     string                   `json:"listenerPath,omitempty"`
	ListenerMetadata string                   `json:"listenerMetadata,omitempty"`
	// Architectures is the old form of ArchMap; Docker refuses both at once.
	Architectures []specs.Arch             `json:"architectures,omitempty"`
	ArchMap       []dockerArch             `json:"archMap,omitempty"`
	Syscalls      []dockerSyscall          `json:"syscalls"`
	Flags         []specs.LinuxSeccompFlag `json:"flags,omitempty"`
}

// dockerArch is one archMap entry: Docker loads the entry of the host's
// architecture with its sub-architectures (the compat ABIs).
type dockerArch struct {
	Architecture     specs.Arch   `json:"architecture"`
	SubArchitectures []specs.Arch `json:"subArchitectures"`
}

type dockerSyscall struct {
	Names []string `json:"names,omitempty"`
	// Name is the old single-name form.
	Name     string                   `json:"name,omitempty"`
	Action   specs.LinuxSeccompAction `json:"action"`
	ErrnoRet *uint                    `json:"errnoRet,omitempty"`
	Args     []dockerArg              `json:"args"`
	Comment  string                   `json:"comment,omitempty"`
	Includes *dockerFilter            `json:"includes,omitempty"`
	Excludes *dockerFilter            `json:"excludes,omitempty"`
}

// dockerFilter limits a syscall entry to (includes) or away from (excludes)
// containers with these capabilities, on these Go architecture names, on
// kernels at least this version.
type dockerFilter struct {
	Caps      []string `json:"caps,omitempty"`
	Arches    []string `json:"arches,omitempty"`
	MinKernel string   `json:"minKernel,omitempty"`
}

type dockerArg struct {
	Index    uint                       `json:"index"`
	Value    uint64                     `json:"value"`
	ValueTwo uint64                     `json:"valueTwo"`
	Op       specs.LinuxSeccompOperator `json:"op"`
}

// DockerJSON renders the policy as a Docker seccomp profile: an archMap
// entry per reviewed architecture (without sub-architectures: the filter
// refuses compat ABIs), defaultErrnoRet for an errno default, one entry per
// compiled rule with its reason as the comment, limited by includes.arches
// to the architectures where the system call exists when that is not all of
// them. Docker picks the host's entry, so on the host it is the same filter
// as OCI and Libcontainer; "awf policy import" reads it back to the same
// decision table on every architecture.
func (p *Policy) DockerJSON() ([]byte, error) {
	oci, err := p.OCI() // the host must be a reviewed architecture
	if err != nil {
		return nil, err
	}
	prof := dockerProfile{DefaultAction: oci.DefaultAction, DefaultErrnoRet: oci.DefaultErrnoRet}
	type entry struct {
		c      call
		arches []string
	}
	var order []string
	byKey := map[string]*entry{}
	for _, name := range p.Arches {
		a, err := lookupArch(name)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", p.Name, err)
		}
		prof.ArchMap = append(prof.ArchMap, dockerArch{Architecture: a.oci, SubArchitectures: []specs.Arch{}})
		for _, c := range p.calls(a) {
			k := c.key() + " " + c.rule.Action.String()
			e := byKey[k]
			if e == nil {
				e = &entry{c: c}
				byKey[k] = e
				order = append(order, k)
			}
			e.arches = append(e.arches, a.goarch)
		}
	}
	sort.Strings(order)
	for _, k := range order {
		e := byKey[k]
		act, errno := ociAction(e.c.rule.Action)
		ds := dockerSyscall{Names: []string{e.c.rule.Syscall}, Action: act, ErrnoRet: errno, Args: []dockerArg{}, Comment: e.c.rule.Reason}
		for _, a := range e.c.args {
			ds.Args = append(ds.Args, dockerArg{Index: a.Index, Value: a.Value, ValueTwo: a.ValueTwo, Op: ociOps[a.Op]})
		}
		if len(e.arches) != len(p.Arches) {
			ds.Includes = &dockerFilter{Arches: e.arches}
		}
		prof.Syscalls = append(prof.Syscalls, ds)
	}
	out, err := json.MarshalIndent(prof, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("policy %s: docker profile: %w", p.Name, err)
	}
	return append(out, '\n'), nil
}
