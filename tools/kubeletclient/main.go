// Command kubeletclient drives a DRA kubelet plugin over its unix sockets as the kubelet
// does, with upstream's own generated packages (k8s.io/kubelet v0.37.2): the plugin
// watcher's registration handshake, the DRA manager's choice of gRPC service, its calls and
// the checks it makes on the answers. The CDI device IDs the plugin returns are resolved as
// a container runtime resolves them: through the CDI library's cache of the spec directory.
//
//	kubeletclient -registration SOCKET [-services LIST] [-cdi-dir DIR] register
//	kubeletclient -registration SOCKET ... prepare|unprepare NAMESPACE/NAME/UID ...
//
// One JSON object goes to stdout: the plugin's info, the chosen service, the claims' answers
// and `problems`, everything the kubelet would refuse in the answer (empty when it accepts
// it). A failure the kubelet would treat as a failed call (registration refused, a gRPC
// error) goes to stderr with exit status 1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// The kubelet's timeouts: dialing the registration socket, GetInfo, and every DRA call.
const (
	dialTimeout    = 10 * time.Second
	getInfoTimeout = time.Second
)

// What a 1.37 kubelet speaks, newest first (its servicesSupportedByKubelet).
var kubeletServices = []string{drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService}

type pluginInfo struct {
	Type              string   `json:"type"`
	Name              string   `json:"name"`
	Endpoint          string   `json:"endpoint"`
	SupportedVersions []string `json:"supportedVersions"`
}

type device struct {
	RequestNames []string `json:"requestNames"`
	PoolName     string   `json:"poolName"`
	DeviceName   string   `json:"deviceName"`
	CDIDeviceIDs []string `json:"cdiDeviceIDs"`
	ShareID      *string  `json:"shareID,omitempty"`
}

type claimResult struct {
	Devices []device `json:"devices"`
	Error   string   `json:"error"`
}

type report struct {
	Plugin   pluginInfo             `json:"plugin"`
	Service  string                 `json:"service"`
	Claims   map[string]claimResult `json:"claims,omitempty"`
	Problems []string               `json:"problems"`
}

func main() {
	registration := flag.String("registration", "", "the plugin's registration socket (plugins_registry/<driver>-reg.sock)")
	services := flag.String("services", strings.Join(kubeletServices, ","), "the DRA services this kubelet speaks, newest first")
	cdiDir := flag.String("cdi-dir", "", "resolve the returned CDI device IDs against the specs in this directory")
	timeout := flag.Duration("timeout", 45*time.Second, "per-call timeout (the kubelet's default)")
	flag.Parse()
	if *registration == "" || flag.NArg() < 1 {
		fail(errors.New("usage: kubeletclient -registration SOCKET [-services LIST] [-cdi-dir DIR] register|prepare|unprepare [NAMESPACE/NAME/UID ...]"))
	}
	claims, err := parseClaims(flag.Args()[1:])
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	out, conn, err := register(ctx, *registration, strings.Split(*services, ","))
	if err != nil {
		fail(err)
	}
	defer conn.Close()
	out.Problems = []string{}
	switch command := flag.Arg(0); command {
	case "register":
	case "prepare":
		err = prepare(ctx, conn, out, claims, *timeout, *cdiDir)
	case "unprepare":
		err = unprepare(ctx, conn, out, claims, *timeout)
	default:
		err = fmt.Errorf("unknown command %q", command)
	}
	if err != nil {
		fail(err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kubeletclient:", err)
	os.Exit(1)
}

func parseClaims(args []string) ([]*drapbv1.Claim, error) {
	claims := make([]*drapbv1.Claim, 0, len(args))
	for _, arg := range args {
		parts := strings.Split(arg, "/")
		if len(parts) != 3 {
			return nil, fmt.Errorf("claim %q: want NAMESPACE/NAME/UID", arg)
		}
		claims = append(claims, &drapbv1.Claim{Namespace: parts[0], Name: parts[1], Uid: parts[2]})
	}
	return claims, nil
}

// register is the plugin watcher's handshake: GetInfo on the registration socket, the DRA
// handler's validation (plugin type, a service both sides speak), a connection to the
// advertised endpoint, then NotifyRegistrationStatus with the outcome.
func register(ctx context.Context, socket string, services []string) (*report, *grpc.ClientConn, error) {
	dialCtx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	// The plugin watcher's own dial (deprecated in grpc-go, still what the kubelet does).
	regConn, err := grpc.DialContext(dialCtx, socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithBlock(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("dial failed at socket %s: %w", socket, err)
	}
	defer regConn.Close()
	client := registerapi.NewRegistrationClient(regConn)
	infoCtx, cancelInfo := context.WithTimeout(ctx, getInfoTimeout)
	defer cancelInfo()
	info, err := client.GetInfo(infoCtx, &registerapi.InfoRequest{})
	if err != nil {
		return nil, nil, fmt.Errorf("GetInfo at socket %s: %w", socket, err)
	}
	out := &report{Plugin: pluginInfo{
		Type: info.Type, Name: info.Name, Endpoint: info.Endpoint, SupportedVersions: info.SupportedVersions,
	}}
	refuse := func(reason string) (*report, *grpc.ClientConn, error) {
		if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: reason}); err != nil {
			return nil, nil, fmt.Errorf("%s (and NotifyRegistrationStatus failed: %w)", reason, err)
		}
		return nil, nil, errors.New(reason)
	}
	if info.Type != registerapi.DRAPlugin {
		return refuse(fmt.Sprintf("no handler registered for plugin type: %s at socket %s", info.Type, socket))
	}
	endpoint := info.Endpoint
	if endpoint == "" {
		endpoint = socket
	}
	out.Service = chooseService(info.SupportedVersions, services)
	if out.Service == "" {
		return refuse(fmt.Sprintf("none of services supported by the plugin (%q) are supported by the kubelet (%q)", info.SupportedVersions, services))
	}
	conn, err := grpc.NewClient("unix:"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return refuse(fmt.Sprintf("create gRPC connection to DRA driver %s plugin at endpoint %s: %v", info.Name, endpoint, err))
	}
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("NotifyRegistrationStatus at socket %s: %w", socket, err)
	}
	return out, conn, nil
}

// chooseService walks the plugin's list in its order and takes the first service the
// kubelet also speaks.
func chooseService(plugin, kubelet []string) string {
	for _, service := range plugin {
		if slices.Contains(kubelet, service) {
			return service
		}
	}
	return ""
}

// The kubelet calls through the v1 API and converts for a v1beta1 plugin.
type draClient interface {
	NodePrepareResources(context.Context, *drapbv1.NodePrepareResourcesRequest, ...grpc.CallOption) (*drapbv1.NodePrepareResourcesResponse, error)
	NodeUnprepareResources(context.Context, *drapbv1.NodeUnprepareResourcesRequest, ...grpc.CallOption) (*drapbv1.NodeUnprepareResourcesResponse, error)
}

func clientFor(conn *grpc.ClientConn, service string) draClient {
	if service == drapbv1beta1.DRAPluginService {
		return drapbv1beta1.V1Beta1ClientWrapper{DRAPluginClient: drapbv1beta1.NewDRAPluginClient(conn)}
	}
	return drapbv1.NewDRAPluginClient(conn)
}

func prepare(ctx context.Context, conn *grpc.ClientConn, out *report, claims []*drapbv1.Claim, timeout time.Duration, cdiDir string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	response, err := clientFor(conn, out.Service).NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: claims})
	if err != nil {
		return fmt.Errorf("NodePrepareResources: %w", err)
	}
	out.Claims = map[string]claimResult{}
	var ids []string
	for uid, result := range response.Claims {
		entry := claimResult{Devices: []device{}, Error: result.GetError()}
		for _, d := range result.GetDevices() {
			entry.Devices = append(entry.Devices, device{
				RequestNames: d.RequestNames, PoolName: d.PoolName, DeviceName: d.DeviceName,
				CDIDeviceIDs: d.CdiDeviceIds, ShareID: d.ShareId,
			})
			ids = append(ids, d.CdiDeviceIds...)
		}
		out.Claims[uid] = entry
	}
	out.Problems = acceptance("NodePrepareResources", claims, claimErrors(response.Claims))
	if cdiDir != "" {
		out.Problems = append(out.Problems, resolveCDI(cdiDir, ids)...)
	}
	return nil
}

func unprepare(ctx context.Context, conn *grpc.ClientConn, out *report, claims []*drapbv1.Claim, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	response, err := clientFor(conn, out.Service).NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: claims})
	if err != nil {
		return fmt.Errorf("NodeUnprepareResources: %w", err)
	}
	out.Claims = map[string]claimResult{}
	errs := map[string]string{}
	for uid, result := range response.Claims {
		out.Claims[uid] = claimResult{Devices: []device{}, Error: result.GetError()}
		errs[uid] = result.GetError()
	}
	out.Problems = acceptance("NodeUnprepareResources", claims, errs)
	return nil
}

func claimErrors(results map[string]*drapbv1.NodePrepareResourceResponse) map[string]string {
	errs := map[string]string{}
	for uid, result := range results {
		errs[uid] = result.GetError()
	}
	return errs
}

// acceptance is what the kubelet's DRA manager refuses in an answer: a claim it did not
// ask for, a per-claim error, a claim left out.
func acceptance(call string, claims []*drapbv1.Claim, errs map[string]string) []string {
	problems := []string{}
	asked := map[string]*drapbv1.Claim{}
	for _, claim := range claims {
		asked[claim.Uid] = claim
	}
	for uid, message := range errs {
		claim, ok := asked[uid]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s returned result for unknown claim UID %s", call, uid))
			continue
		}
		if message != "" {
			problems = append(problems, fmt.Sprintf("%s failed for ResourceClaim %s: %s", call, claim.Name, message))
		}
	}
	if skipped := len(claims) - len(errs); skipped > 0 {
		problems = append(problems, fmt.Sprintf("%s skipped %d ResourceClaims", call, skipped))
	}
	slices.Sort(problems)
	return problems
}

// resolveCDI loads the spec directory as a runtime's CDI cache does and looks every ID
// up: a spec the library refuses, or an ID it cannot resolve, is a container that will
// not start.
func resolveCDI(dir string, ids []string) []string {
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	if err != nil {
		return []string{fmt.Sprintf("CDI cache of %s: %v", dir, err)}
	}
	var problems []string
	for path, errs := range cache.GetErrors() {
		for _, err := range errs {
			problems = append(problems, fmt.Sprintf("CDI spec %s: %v", path, err))
		}
	}
	for _, id := range ids {
		if cache.GetDevice(id) == nil {
			problems = append(problems, fmt.Sprintf("CDI device %q: unresolvable in %s", id, dir))
		}
	}
	slices.Sort(problems)
	return problems
}
