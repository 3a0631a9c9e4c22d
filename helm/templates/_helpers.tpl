{{/* Names */}}
{{- define "natsd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "natsd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "natsd.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "natsd.statefulSetName" -}}
{{- default (include "natsd.fullname" .) .Values.statefulSet.name -}}
{{- end -}}
{{- define "natsd.serviceName" -}}
{{- default (include "natsd.fullname" .) .Values.service.name -}}
{{- end -}}
{{- define "natsd.headlessServiceName" -}}
{{- default (printf "%s-headless" (include "natsd.fullname" .)) .Values.headlessService.name -}}
{{- end -}}
{{- define "natsd.configMapName" -}}
{{- default (printf "%s-config" (include "natsd.fullname" .)) .Values.configMap.name -}}
{{- end -}}
{{- define "natsd.pdbName" -}}
{{- default (include "natsd.fullname" .) .Values.podDisruptionBudget.name -}}
{{- end -}}
{{- define "natsd.serviceAccountName" -}}
{{- default (include "natsd.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}
{{- define "natsd.jsPvcName" -}}
{{- default (printf "%s-js" (include "natsd.fullname" .)) .Values.config.jetstream.fileStore.pvc.name -}}
{{- end -}}
{{/* The store's volume: the PVC when fileStore and its pvc are on, else an emptyDir (the
     container's root filesystem is read-only) */}}
{{- define "natsd.jsPvc" -}}
{{- $js := .Values.config.jetstream -}}
{{- if and $js.enabled $js.fileStore.enabled $js.fileStore.pvc.enabled }}true{{ end -}}
{{- end -}}
{{/* A size as the nats-io chart writes it: a string unquoted (10Gi), a number as an integer */}}
{{- define "natsd.size" -}}
{{- if kindIs "string" . }}{{ printf "<< %s >>" . }}{{ else }}{{ printf "<< %d >>" (int64 .) }}{{ end -}}
{{- end -}}
{{- define "natsd.resolverPvcName" -}}
{{- default (printf "%s-resolver" (include "natsd.fullname" .)) .Values.config.resolver.pvc.name -}}
{{- end -}}
{{- define "natsd.resolverPvc" -}}
{{- if and .Values.config.resolver.enabled .Values.config.resolver.pvc.enabled }}true{{ end -}}
{{- end -}}
{{- define "natsd.clusterName" -}}
{{- default (include "natsd.statefulSetName" .) .Values.config.cluster.name -}}
{{- end -}}

{{/* Secrets: the chart's own one, or an existing one */}}
{{- define "natsd.routeAuth" -}}
{{- $r := .Values.config.cluster.routeURLs -}}
{{- if and .Values.config.cluster.enabled (or $r.existingSecret $r.user $r.password) }}true{{ end -}}
{{- end -}}
{{- define "natsd.routeSecretName" -}}
{{- default (printf "%s-routes" (include "natsd.fullname" .)) .Values.config.cluster.routeURLs.existingSecret -}}
{{- end -}}
{{- define "natsd.authSecretName" -}}
{{- default (printf "%s-auth" (include "natsd.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{/* Labels */}}
{{- define "natsd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "natsd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: nats
{{- end -}}

{{- define "natsd.labels" -}}
{{ include "natsd.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.global.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* An image, as the nats-io chart writes it: (dict "image" .Values.x.image "global"
     .Values.global "tag" default-tag). repository@digest when digest is set (else
     repository:tag), the registry (its own, else global's) in front; fullImageName replaces it all */}}
{{- define "natsd.image" -}}
{{- $registry := default .global.image.registry .image.registry -}}
{{- $ref := "" -}}
{{- if .image.digest -}}
{{- $ref = printf "%s@%s" .image.repository .image.digest -}}
{{- else -}}
{{- $ref = printf "%s:%s" .image.repository (default .tag .image.tag | toString) -}}
{{- end -}}
{{- if $registry }}{{ $ref = printf "%s/%s" $registry $ref }}{{ end -}}
{{- with .image.fullImageName }}{{ $ref = . }}{{ end -}}
{{- $ref -}}
{{- end -}}

{{- define "natsd.pullPolicy" -}}
{{- if .image.pullPolicy }}{{ .image.pullPolicy }}{{ else if .global.image.pullPolicy }}{{ .global.image.pullPolicy }}{{ end -}}
{{- end -}}

{{/* The protocols with a port, in the nats-io chart's order (profiling: refused below) */}}
{{- define "natsd.protocols" -}}
nats leafnodes websocket mqtt cluster gateway monitor profiling
{{- end -}}
{{/* The protocols with a tls block */}}
{{- define "natsd.tlsProtocols" -}}
nats leafnodes cluster gateway
{{- end -}}
{{/* Is protocol .p on? (nats always) */}}
{{- define "natsd.protocolOn" -}}
{{- if or (eq .p "nats") (get .ctx.Values.config .p).enabled }}true{{ end -}}
{{- end -}}

{{/* What natsd does not build, and values that cannot work: rendering fails with a clear message */}}
{{- define "natsd.unsupported" -}}
{{- $c := .Values.config -}}
{{- if $c.websocket.enabled }}{{ fail "config.websocket.enabled: WebSocket is not supported by natsd yet" }}{{ end -}}
{{- if $c.mqtt.enabled }}{{ fail "config.mqtt.enabled: MQTT is not supported by natsd yet" }}{{ end -}}
{{- if $c.profiling.enabled }}{{ fail "config.profiling.enabled: profiling (prof_port) is not supported by natsd yet" }}{{ end -}}
{{- if and $c.monitor.enabled $c.monitor.tls.enabled (not $c.nats.tls.enabled) }}{{ fail "config.monitor.tls.enabled needs config.nats.tls.enabled (HTTPS monitoring uses the client TLS block)" }}{{ end -}}
{{- range $p := splitList " " (include "natsd.tlsProtocols" .) -}}
{{- $pv := get $c $p -}}
{{- if and (include "natsd.protocolOn" (dict "ctx" $ "p" $p)) $pv.tls.enabled (not $pv.tls.secretName) (not (and $pv.tls.merge (get $pv.tls.merge "cert_file"))) (not $pv.tls.patch) -}}
{{- fail (printf "config.%s.tls.secretName is required when config.%s.tls.enabled (or give cert_file and key_file through config.%s.tls.merge or patch)" $p $p $p) -}}
{{- end -}}
{{- end -}}
{{- if $c.resolver.enabled -}}
{{- $t := "full" }}{{ with $c.resolver.merge }}{{ $t = get . "type" | default "full" | toString }}{{ end -}}
{{- if ne (lower $t) "full" }}{{ fail (printf "config.resolver.merge.type %q: natsd builds the full resolver only (type: full)" $t) }}{{ end -}}
{{- end -}}
{{- if and .Values.tlsCA.enabled (not (or .Values.tlsCA.secretName .Values.tlsCA.configMapName)) }}{{ fail "tlsCA.secretName or tlsCA.configMapName is required when tlsCA.enabled" }}{{ end -}}
{{- $r := .Values.config.cluster.routeURLs -}}
{{- if and (not $r.existingSecret) (or $r.user $r.password) (not (and $r.user $r.password)) }}{{ fail "config.cluster.routeURLs: set both user and password (or existingSecret)" }}{{ end -}}
{{- $a := .Values.auth -}}
{{- if $a.enabled -}}
{{- if and (eq $a.type "include") (not $a.existingSecret) }}{{ fail "auth.type include needs auth.existingSecret (a Secret holding the config fragment under auth.includeKey)" }}{{ end -}}
{{- if and (eq $a.type "user") (not $a.existingSecret) (not (and $a.user $a.password)) }}{{ fail "auth.type user needs auth.user and auth.password (or auth.existingSecret)" }}{{ end -}}
{{- if and (eq $a.type "token") (not $a.existingSecret) (not $a.token) }}{{ fail "auth.type token needs auth.token (or auth.existingSecret)" }}{{ end -}}
{{- end -}}
{{- if and .Values.metrics.enabled (not .Values.config.monitor.enabled) }}{{ fail "metrics.enabled needs config.monitor.enabled" }}{{ end -}}
{{- if and .Values.promExporter.enabled (not .Values.config.monitor.enabled) }}{{ fail "promExporter.enabled needs config.monitor.enabled" }}{{ end -}}
{{- end -}}

{{/* Route hosts and URLs */}}
{{- define "natsd.domainSuffix" -}}
{{- if .Values.config.cluster.routeURLs.useFQDN -}}
{{- printf ".%s.svc.%s" (include "natsd.namespace" .) .Values.config.cluster.routeURLs.k8sClusterDomain -}}
{{- end -}}
{{- end -}}

{{/* The route hosts, one per line: the headless name, or every pod */}}
{{- define "natsd.routeHosts" -}}
{{- $headless := include "natsd.headlessServiceName" . -}}
{{- $suffix := include "natsd.domainSuffix" . -}}
{{- if eq .Values.config.cluster.seed "pods" -}}
{{- $sts := include "natsd.statefulSetName" . -}}
{{- range $i, $_ := until (int .Values.config.cluster.replicas) }}
{{ printf "%s-%d.%s%s" $sts $i $headless $suffix }}
{{- end -}}
{{- else }}
{{ printf "%s%s" $headless $suffix }}
{{- end -}}
{{- end -}}

{{- define "natsd.routeScheme" -}}
{{- if .Values.config.cluster.tls.enabled }}tls{{ else }}nats-route{{ end -}}
{{- end -}}

{{/* The CA file of every tls block (tlsCA), if any */}}
{{- define "natsd.caFile" -}}
{{- with .Values.tlsCA -}}
{{- if and .enabled (or .secretName .configMapName) -}}
{{- printf "%s/%s" (trimSuffix "/" .dir) (default "ca.crt" .key) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A tls block, as the nats-io chart's: cert_file and key_file in .tls.dir when .tls.secretName
     is set, ca_file from tlsCA, then .tls.merge and .tls.patch. (dict "ctx" $ "tls" values
     "what" "config.x.tls" "base" extra-keys "out" holder): the block is left in .out.tls */}}
{{- define "natsd.tlsBlock" -}}
{{- $t := .tls -}}
{{- $m := deepCopy (.base | default dict) -}}
{{- if $t.secretName -}}
{{- $dir := trimSuffix "/" (toString $t.dir) -}}
{{- $_ := set $m "cert_file" (printf "%s/%s" $dir (default "tls.crt" $t.cert)) -}}
{{- $_ := set $m "key_file" (printf "%s/%s" $dir (default "tls.key" $t.key)) -}}
{{- end -}}
{{- with include "natsd.caFile" .ctx }}{{ $_ := set $m "ca_file" . }}{{ end -}}
{{- $mp := dict "doc" $m "merge" $t.merge "patch" $t.patch "what" .what -}}
{{- include "natsd.mergePatch" $mp -}}
{{- $_ := set .out "tls" $mp.doc -}}
{{- end -}}

{{/* nats.conf as a map: (dict "ctx" $ "out" holder), left in .out.conf. Every block is built as
     the nats-io chart builds it, then gets its merge and patch */}}
{{- define "natsd.configDict" -}}
{{- $ctx := .ctx -}}
{{- $v := $ctx.Values -}}
{{- $cv := $v.config -}}
{{- $c := dict "server_name" "<< $SERVER_NAME >>" "port" $cv.nats.port "pid_file" "/var/run/nats/nats.pid" -}}
{{- $h := dict -}}
{{- if $cv.nats.tls.enabled -}}
{{- include "natsd.tlsBlock" (dict "ctx" $ctx "tls" $cv.nats.tls "what" "config.nats.tls" "out" $h) -}}
{{- $_ := set $c "tls" $h.tls -}}
{{- end -}}
{{- if $cv.monitor.enabled -}}
{{- $_ := set $c (ternary "https_port" "http_port" (and $cv.monitor.tls.enabled $cv.nats.tls.enabled)) $cv.monitor.port -}}
{{- end -}}
{{- if $cv.lameDuck.enabled -}}
{{- $_ := set $c "lame_duck_duration" (printf "%ds" (int $cv.lameDuck.duration)) -}}
{{- $_ := set $c "lame_duck_grace_period" (printf "%ds" (int $cv.lameDuck.gracePeriod)) -}}
{{- end -}}
{{- if $cv.leafnodes.enabled -}}
{{- $ln := $cv.leafnodes -}}
{{- $lm := dict "port" $ln.port "no_advertise" true -}}
{{- if $ln.tls.enabled -}}
{{- include "natsd.tlsBlock" (dict "ctx" $ctx "tls" $ln.tls "what" "config.leafnodes.tls" "out" $h) -}}
{{- $_ := set $lm "tls" $h.tls -}}
{{- end -}}
{{- $mp := dict "doc" $lm "merge" $ln.merge "patch" $ln.patch "what" "config.leafnodes" -}}
{{- include "natsd.mergePatch" $mp -}}
{{- $_ := set $c "leafnodes" $mp.doc -}}
{{- end -}}
{{- if $cv.cluster.enabled -}}
{{- $cl := $cv.cluster -}}
{{- $routes := list -}}
{{- $auth := include "natsd.routeAuth" $ctx -}}
{{- range $i, $host := splitList "\n" (include "natsd.routeHosts" $ctx | trim) -}}
{{- if $auth -}}
{{- $routes = append $routes (printf "<< $NATSD_ROUTE_%d >>" $i) -}}
{{- else -}}
{{- $routes = append $routes (printf "%s://%s:%d" (include "natsd.routeScheme" $ctx) $host (int $cl.port)) -}}
{{- end -}}
{{- end -}}
{{- $routes = concat $routes ($cl.extraRoutes | default list) -}}
{{- $cm := dict "name" (include "natsd.clusterName" $ctx) "port" $cl.port "no_advertise" $cl.noAdvertise "routes" $routes -}}
{{- if $cl.connectRetries }}{{ $_ := set $cm "connect_retries" $cl.connectRetries }}{{ end -}}
{{- if $auth -}}
{{- $_ := set $cm "authorization" (dict "user" "<< $NATSD_ROUTE_USER >>" "password" "<< $NATSD_ROUTE_PASSWORD >>") -}}
{{- end -}}
{{- if $cl.tls.enabled -}}
{{- $base := dict -}}
{{- if hasKey $cl.tls "verify" }}{{ $_ := set $base "verify" $cl.tls.verify }}{{ end -}}
{{- with $cl.tls.timeout }}{{ $_ := set $base "timeout" . }}{{ end -}}
{{- if and $cl.tls.secretName $cl.tls.ca -}}
{{- $_ := set $base "ca_file" (printf "%s/%s" (trimSuffix "/" $cl.tls.dir) $cl.tls.ca) -}}
{{- end -}}
{{- include "natsd.tlsBlock" (dict "ctx" $ctx "tls" $cl.tls "what" "config.cluster.tls" "base" $base "out" $h) -}}
{{- $_ := set $cm "tls" $h.tls -}}
{{- end -}}
{{- $mp := dict "doc" $cm "merge" $cl.merge "patch" $cl.patch "what" "config.cluster" -}}
{{- include "natsd.mergePatch" $mp -}}
{{- $_ := set $c "cluster" $mp.doc -}}
{{- end -}}
{{- if $cv.gateway.enabled -}}
{{- $gw := $cv.gateway -}}
{{- $gm := dict "name" (include "natsd.clusterName" $ctx) "port" $gw.port -}}
{{- if $gw.tls.enabled -}}
{{- include "natsd.tlsBlock" (dict "ctx" $ctx "tls" $gw.tls "what" "config.gateway.tls" "out" $h) -}}
{{- $_ := set $gm "tls" $h.tls -}}
{{- end -}}
{{- $mp := dict "doc" $gm "merge" $gw.merge "patch" $gw.patch "what" "config.gateway" -}}
{{- include "natsd.mergePatch" $mp -}}
{{- $_ := set $c "gateway" $mp.doc -}}
{{- end -}}
{{- if $cv.jetstream.enabled -}}
{{- $js := $cv.jetstream -}}
{{- $jm := dict -}}
{{- if $js.memoryStore.enabled -}}
{{- with $js.memoryStore.maxSize }}{{ $_ := set $jm "max_memory_store" (include "natsd.size" .) }}{{ end -}}
{{- else -}}
{{- $_ := set $jm "max_memory_store" 0 -}}
{{- end -}}
{{- $_ := set $jm "store_dir" $js.fileStore.dir -}}
{{- if $js.fileStore.enabled -}}
{{- if $js.fileStore.maxSize -}}
{{- $_ := set $jm "max_file_store" (include "natsd.size" $js.fileStore.maxSize) -}}
{{- else if $js.fileStore.pvc.enabled -}}
{{- $_ := set $jm "max_file_store" (include "natsd.size" $js.fileStore.pvc.size) -}}
{{- end -}}
{{- else -}}
{{- $_ := set $jm "max_file_store" 0 -}}
{{- end -}}
{{- $mp := dict "doc" $jm "merge" $js.merge "patch" $js.patch "what" "config.jetstream" -}}
{{- include "natsd.mergePatch" $mp -}}
{{- $_ := set $c "jetstream" $mp.doc -}}
{{- end -}}
{{- if $cv.resolver.enabled -}}
{{- $rs := $cv.resolver -}}
{{- $mp := dict "doc" (dict "type" "full" "dir" $rs.dir) "merge" $rs.merge "patch" $rs.patch "what" "config.resolver" -}}
{{- include "natsd.mergePatch" $mp -}}
{{- $_ := set $c "resolver" $mp.doc -}}
{{- end -}}
{{- if $v.auth.enabled -}}
{{- if eq $v.auth.type "user" -}}
{{- $_ := set $c "authorization" (dict "user" "<< $NATSD_USER >>" "password" "<< $NATSD_PASSWORD >>" "timeout" $v.auth.timeout) -}}
{{- else if eq $v.auth.type "token" -}}
{{- $_ := set $c "authorization" (dict "token" "<< $NATSD_TOKEN >>" "timeout" $v.auth.timeout) -}}
{{- else -}}
{{- $_ := set $c "$include" (printf "/etc/nats-auth/%s" $v.auth.includeKey) -}}
{{- end -}}
{{- end -}}
{{- $mp := dict "doc" $c "merge" $cv.merge "patch" $cv.patch "what" "config" -}}
{{- include "natsd.mergePatch" $mp -}}
{{- $_ := set .out "conf" $mp.doc -}}
{{- end -}}

{{/* nats.conf: the map rendered as JSON (natsd reads JSON as config); "<< X >>" strings are
     written unquoted (variable references, sizes), a key ending in "$include" becomes an include
     directive (keys are sorted: "$include" comes first, "zzz$include" last) */}}
{{- define "natsd.config" -}}
{{- $h := dict -}}
{{- include "natsd.configDict" (dict "ctx" . "out" $h) -}}
{{- $json := toPrettyJson $h.conf | replace "\\u003c" "<" | replace "\\u003e" ">" | replace "\\u0026" "&" -}}
{{- $json = regexReplaceAll "\"<<\\s+([^\"]*?)\\s+>>\"" $json "${1}" -}}
{{- $json = regexReplaceAll "\"[^\"]*\\$include\": (\"[^\"]*\"),?" $json "include ${1}" -}}
{{- $json -}}
{{- end -}}

{{/* The files nats.conf names (cert_file, key_file, ca_file, includes), one per line, for the
     reloader to watch: (dict "node" conf-map "dir" "/etc/nats-config") */}}
{{- define "natsd.configFiles" -}}
{{- $dir := .dir -}}
{{- if kindIs "map" .node -}}
{{- range $k, $val := .node -}}
{{- if and (has $k (list "cert_file" "key_file" "ca_file")) (kindIs "string" $val) }}
{{ $val }}
{{- else if and (hasSuffix "$include" $k) (kindIs "string" $val) }}
{{ ternary $val (clean (printf "%s/%s" $dir $val)) (isAbs $val) }}
{{- else }}
{{- include "natsd.configFiles" (dict "node" $val "dir" $dir) }}
{{- end -}}
{{- end -}}
{{- else if kindIs "slice" .node -}}
{{- range .node }}{{ include "natsd.configFiles" (dict "node" . "dir" $dir) }}{{ end -}}
{{- end -}}
{{- end -}}

{{/* A port's appProtocol, as the nats-io chart's: http/https for monitor, tcp/tls otherwise */}}
{{- define "natsd.appProtocol" -}}
{{- $pv := get .ctx.Values.config .p -}}
{{- $tls := false -}}
{{- if and (hasKey $pv "tls") $pv.tls.enabled }}{{ $tls = true }}{{ end -}}
{{- if and (eq .p "monitor") (not .ctx.Values.config.nats.tls.enabled) }}{{ $tls = false }}{{ end -}}
{{- if has .p (list "monitor" "websocket") }}{{ ternary "https" "http" $tls }}{{ else }}{{ ternary "tls" "tcp" $tls }}{{ end -}}
{{- end -}}
