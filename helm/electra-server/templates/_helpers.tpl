{{/* Names and labels. */}}
{{- define "electra.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "electra.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "electra.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "electra.commonLabels" -}}
helm.sh/chart: {{ include "electra.chart" . }}
app.kubernetes.io/name: {{ include "electra.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: electra
{{- end }}

{{/* The server's pods (the training Job's pods carry component=training and are not selected). */}}
{{- define "electra.selectorLabels" -}}
app.kubernetes.io/name: {{ include "electra.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end }}

{{- define "electra.labels" -}}
{{ include "electra.commonLabels" . }}
app.kubernetes.io/component: server
{{- end }}

{{- define "electra.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "electra.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The server image: repository@digest, or repository:tag (default <appVersion>-cuda / -cpu). */}}
{{- define "electra.image" -}}
{{- $flavor := ternary "cuda" "cpu" .Values.gpu.enabled }}
{{- $tag := default (printf "%s-%s" .Chart.AppVersion $flavor) .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "electra.device" -}}
{{- default (ternary "cuda" "cpu" .Values.gpu.enabled) .Values.server.device }}
{{- end }}

{{/* Where a model's bundle lies inside the container. */}}
{{- define "electra.modelDir" -}}
{{- $root := .root.Values.modelStorage.mountPath | trimSuffix "/" }}
{{- if .root.Values.kserve.enabled }}
{{- /* KServe: the storage initializer puts kserve.storageUri at /mnt/models. One model without a path is
     that directory itself (storageUri names the bundle); otherwise <path or name> under it. */}}
{{- if hasPrefix "/" (default "" .model.path) }}
{{- .model.path }}
{{- else if .model.path }}
{{- printf "%s/%s" (include "electra.kserveModelRoot" .root) .model.path }}
{{- else if eq (len .root.Values.models) 1 }}
{{- include "electra.kserveModelRoot" .root }}
{{- else }}
{{- printf "%s/%s" (include "electra.kserveModelRoot" .root) .model.name }}
{{- end }}
{{- else if eq .root.Values.modelStorage.type "download" }}
{{- printf "%s/%s" $root .model.name }}
{{- else if hasPrefix "/" (default "" .model.path) }}
{{- .model.path }}
{{- else }}
{{- printf "%s/%s" $root (default .model.name .model.path) }}
{{- end }}
{{- end }}

{{/* ELECTRA_MODELS: name=dir,name2=dir2 */}}
{{- define "electra.modelsEnv" -}}
{{- $items := list }}
{{- range .Values.models }}
{{- $items = append $items (printf "%s=%s" .name (include "electra.modelDir" (dict "root" $ "model" .))) }}
{{- end }}
{{- join "," $items }}
{{- end }}

{{- define "electra.apiKeysSecretName" -}}
{{- default (printf "%s-api-keys" (include "electra.fullname" .)) .Values.apiKeys.existingSecret }}
{{- end }}

{{- define "electra.apiKeysSecretKey" -}}
{{- ternary .Values.apiKeys.existingSecretKey "api-keys" (ne .Values.apiKeys.existingSecret "") }}
{{- end }}

{{- define "electra.modelClaimName" -}}
{{- default (printf "%s-models" (include "electra.fullname" .)) .Values.modelStorage.pvc.existingClaim }}
{{- end }}

{{/* preStop sleep + the server's drain + 10 s for the process to exit. */}}
{{- define "electra.terminationGracePeriod" -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- add (int .Values.preStopSleepSeconds) (int (ceil .Values.server.gracefulTimeout)) 10 }}
{{- else }}
{{- .Values.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/* True when any model is fetched from s3:// (an AWS CLI init container copies those first). */}}
{{- define "electra.hasS3" -}}
{{- $s3 := false }}
{{- range .Values.models }}
{{- if hasPrefix "s3://" (default "" .url) }}{{ $s3 = true }}{{ end }}
{{- end }}
{{- if $s3 }}true{{ end }}
{{- end }}

{{/*
Checks that JSON schema cannot express: each failure says what to set. Included by the templates that
every install renders, so `helm template` and `helm install` stop before anything reaches the cluster.
*/}}
{{- define "electra.validate" -}}
{{- $v := .Values }}
{{- $t := $v.modelStorage.type }}
{{- if $v.kserve.enabled }}
{{- include "electra.validateKServe" . }}
{{- else if not $t }}
{{- fail "\n\nelectra-server: no model source. Set modelStorage.type to one of:\n  pvc       bundles on a PersistentVolumeClaim: --set modelStorage.type=pvc,modelStorage.pvc.existingClaim=CLAIM (or modelStorage.pvc.create=true)\n  download  an init container fetches each bundle: --set modelStorage.type=download,models[0].name=detector,models[0].url=https://host/detector.tar.gz\n  image     bundles baked into the image (Dockerfile build arg MODEL_BUNDLE): --set modelStorage.type=image\nand list the bundles to serve in models (name, and path or url). Examples: the chart's ci/*-values.yaml." }}
{{- end }}
{{- if not $v.models }}
{{- fail (printf "\n\nelectra-server: models is empty. List the bundles to serve, e.g. --set models[0].name=detector%s" (ternary ",models[0].url=https://host/detector.tar.gz" (ternary "" ",models[0].path=detector" $v.kserve.enabled) (eq $t "download"))) }}
{{- end }}
{{- $names := list }}
{{- range $v.models }}
{{- if has .name $names }}
{{- fail (printf "\n\nelectra-server: model name %q is listed twice in models" .name) }}
{{- end }}
{{- $names = append $names .name }}
{{- if and (eq $t "download") (not .url) }}
{{- fail (printf "\n\nelectra-server: modelStorage.type=download needs a url for every model; models[name=%s] has none (an https://, http:// or s3:// URL of a bundle archive (.tar.gz, .tgz, .tar), or an s3:// prefix ending in /)" .name) }}
{{- end }}
{{- if and (eq $t "download") .url (not (hasPrefix "s3://" .url)) (not (regexMatch "\\.(tar\\.gz|tgz|tar)([?#].*)?$" .url)) }}
{{- fail (printf "\n\nelectra-server: models[name=%s].url must name a bundle archive (.tar.gz, .tgz or .tar) for http(s) downloads, got %q" .name .url) }}
{{- end }}
{{- if and (ne $t "download") .url }}
{{- fail (printf "\n\nelectra-server: models[name=%s].url is only used with modelStorage.type=download (now %q); use path for pvc and image" .name $t) }}
{{- end }}
{{- end }}
{{- if and (eq $t "pvc") (not $v.modelStorage.pvc.existingClaim) (not $v.modelStorage.pvc.create) }}
{{- fail "\n\nelectra-server: modelStorage.type=pvc needs modelStorage.pvc.existingClaim (a claim holding the bundles) or modelStorage.pvc.create=true" }}
{{- end }}
{{- if and $v.apiKeys.enabled (not $v.apiKeys.keys) (not $v.apiKeys.existingSecret) }}
{{- fail "\n\nelectra-server: apiKeys.enabled needs apiKeys.existingSecret (a Secret with the keys file under apiKeys.existingSecretKey) or apiKeys.keys (16+ characters each)" }}
{{- end }}
{{- if and $v.apiKeys.keys $v.apiKeys.existingSecret }}
{{- fail "\n\nelectra-server: set apiKeys.keys or apiKeys.existingSecret, not both" }}
{{- end }}
{{- if and $v.autoscaling.enabled $v.keda.enabled }}
{{- fail "\n\nelectra-server: autoscaling.enabled and keda.enabled both scale the Deployment (KEDA creates its own HPA); enable one" }}
{{- end }}
{{- if $v.autoscaling.enabled }}
{{- if lt (int $v.autoscaling.maxReplicas) (int $v.autoscaling.minReplicas) }}
{{- fail "\n\nelectra-server: autoscaling.maxReplicas must be >= autoscaling.minReplicas" }}
{{- end }}
{{- if and (kindIs "invalid" $v.autoscaling.targetCPUUtilizationPercentage) (kindIs "invalid" $v.autoscaling.targetMemoryUtilizationPercentage) (not $v.autoscaling.queueSize.enabled) }}
{{- fail "\n\nelectra-server: autoscaling.enabled needs a metric: autoscaling.queueSize.enabled=true (via prometheus-adapter), autoscaling.targetCPUUtilizationPercentage or autoscaling.targetMemoryUtilizationPercentage" }}
{{- end }}
{{- end }}
{{- if and $v.keda.enabled (lt (int $v.keda.maxReplicaCount) (int $v.keda.minReplicaCount)) }}
{{- fail "\n\nelectra-server: keda.maxReplicaCount must be >= keda.minReplicaCount" }}
{{- end }}
{{- if and $v.gpu.enabled $v.gpu.products $v.affinity.nodeAffinity }}
{{- fail "\n\nelectra-server: gpu.products adds a node affinity; with affinity.nodeAffinity set, put the GPU product rule there and leave gpu.products empty" }}
{{- end }}
{{- if and (eq (include "electra.device" .) "cuda") (not $v.gpu.enabled) }}
{{- fail "\n\nelectra-server: server.device=cuda needs gpu.enabled=true (a pod without a GPU limit sees no GPU)" }}
{{- end }}
{{- end }}

{{/* Checks of the optional training Job. */}}
{{- define "electra.validateTraining" -}}
{{- $tr := .Values.training }}
{{- if not $tr.dataClaim }}
{{- fail "\n\nelectra-server: training.enabled needs training.dataClaim (a PVC holding the output of `electra data prepare`, mounted at /data)" }}
{{- end }}
{{- if not $tr.runsClaim }}
{{- fail "\n\nelectra-server: training.enabled needs training.runsClaim (a PVC for checkpoints and final models, mounted at /runs; ReadWriteMany when training.nodes > 1)" }}
{{- end }}
{{- end }}

{{- define "electra.trainingImage" -}}
{{- $repo := default .Values.image.repository .Values.training.image.repository }}
{{- printf "%s:%s" $repo (default (printf "%s-train" .Chart.AppVersion) .Values.training.image.tag) }}
{{- end }}

{{- define "electra.trainingKind" -}}
{{- if eq .Values.training.kind "auto" }}
{{- ternary "PyTorchJob" "Job" (.Capabilities.APIVersions.Has "kubeflow.org/v1/PyTorchJob") }}
{{- else }}
{{- .Values.training.kind }}
{{- end }}
{{- end }}

{{- define "electra.trainingName" -}}
{{- printf "%s-%s" (include "electra.fullname" .) .Values.training.runName | trunc 52 | trimSuffix "-" }}
{{- end }}

{{/*
Resources (plus the GPU limit: for extended resources the request defaults to the limit) and scheduling (the
GPU node selector, tolerations and product affinity, then the user's), as YAML for fromYaml: shared by the
Deployment and the KServe ServingRuntime.
*/}}
{{- define "electra.podPlacement" -}}
{{- $v := .Values }}
{{- $resources := deepCopy (default dict $v.resources) }}
{{- if $v.gpu.enabled }}
{{- $limits := default dict $resources.limits }}
{{- $_ := set $limits $v.gpu.resourceName (int $v.gpu.count) }}
{{- $_ := set $resources "limits" $limits }}
{{- end }}
{{- $nodeSelector := dict }}
{{- if $v.gpu.enabled }}
{{- $nodeSelector = mergeOverwrite $nodeSelector (deepCopy $v.gpu.nodeSelector) }}
{{- end }}
{{- $nodeSelector = mergeOverwrite $nodeSelector (deepCopy $v.nodeSelector) }}
{{- $tolerations := $v.tolerations }}
{{- if $v.gpu.enabled }}
{{- $tolerations = concat $v.gpu.tolerations $v.tolerations }}
{{- end }}
{{- $affinity := deepCopy (default dict $v.affinity) }}
{{- if and $v.gpu.enabled $v.gpu.products }}
{{- $term := dict "matchExpressions" (list (dict "key" "nvidia.com/gpu.product" "operator" "In" "values" $v.gpu.products)) }}
{{- $_ := set $affinity "nodeAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (dict "nodeSelectorTerms" (list $term))) }}
{{- end }}
{{- toYaml (dict "resources" $resources "nodeSelector" $nodeSelector "tolerations" (default list $tolerations) "affinity" $affinity) }}
{{- end }}

{{/* topologySpreadConstraints with labelSelector filled in (the server pods' selector labels), as a YAML list. */}}
{{- define "electra.topologySpread" -}}
{{- $spread := list }}
{{- range .Values.topologySpreadConstraints }}
{{- $c := deepCopy . }}
{{- if not (hasKey $c "labelSelector") }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (include "electra.selectorLabels" $ | fromYaml)) }}
{{- end }}
{{- $spread = append $spread $c }}
{{- end }}
{{- toYaml $spread }}
{{- end }}

{{/* KServe: the InferenceService, the ServingRuntime it runs on, and where the storage initializer puts the model. */}}
{{- define "electra.kserveName" -}}
{{- default (include "electra.fullname" .) .Values.kserve.name | trunc 45 | trimSuffix "-" }}
{{- end }}

{{- define "electra.kserveRuntimeName" -}}
{{- default (include "electra.fullname" .) .Values.kserve.runtime.name }}
{{- end }}

{{- define "electra.kserveModelRoot" -}}
/mnt/models
{{- end }}

{{/* The KServe mode's checks (instead of the model source checks of the chart's own Deployment). */}}
{{- define "electra.validateKServe" -}}
{{- $v := .Values }}
{{- $k := $v.kserve }}
{{- if $v.modelStorage.type }}
{{- fail (printf "\n\nelectra-server: kserve.enabled takes the bundles from KServe's storage initializer (kserve.storageUri, unpacked into /mnt/models); unset modelStorage.type (now %q)" $v.modelStorage.type) }}
{{- end }}
{{- range $v.models }}
{{- if .url }}
{{- fail (printf "\n\nelectra-server: models[name=%s].url is not used with kserve.enabled: KServe downloads kserve.storageUri into /mnt/models; give models[].path relative to it (or nothing for a single bundle)" .name) }}
{{- end }}
{{- if and (not $k.storageUri) (not (hasPrefix "/" (default "" .path))) }}
{{- fail (printf "\n\nelectra-server: kserve.enabled needs kserve.storageUri (s3://, gs://, https://, pvc://CLAIM/PATH, ...: a bundle directory or archive, or a folder of bundles), or an absolute models[].path baked into the image; models[name=%s] has neither" .name) }}
{{- end }}
{{- end }}
{{- range $key := list "autoscaling" "keda" "ingress" }}
{{- if (index $v $key).enabled }}
{{- fail (printf "\n\nelectra-server: %s.enabled has no effect with kserve.enabled (KServe creates and scales the predictor's Deployment and Service and exposes it): use kserve.minReplicas, kserve.maxReplicas, kserve.scaleMetric and kserve.scaleTarget, and KServe's ingress" $key) }}
{{- end }}
{{- end }}
{{- if $v.metrics.serviceMonitor.enabled }}
{{- fail "\n\nelectra-server: metrics.serviceMonitor selects the chart's Service, which kserve.enabled does not render; use metrics.podAnnotations=true (KServe's serving.kserve.io/enable-prometheus-scraping) or a PodMonitor of your own" }}
{{- end }}
{{- if and (gt (int $k.maxReplicas) 0) (lt (int $k.maxReplicas) (int $k.minReplicas)) }}
{{- fail "\n\nelectra-server: kserve.maxReplicas must be >= kserve.minReplicas (or 0: no limit)" }}
{{- end }}
{{- end }}
