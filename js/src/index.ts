export { Kiln, Tensor, Model, TYPE_IDS } from './kiln.js';
export type { Build, DType, KilnOptions, KilnInfo, LoadOptions, MemoryStats, ModelSource, RopeOptions, TensorData, TensorInfo, ModelInfo, MetadataValue } from './kiln.js';
export type { Progress } from './scheduler.js';
export { KilnError, KilnAbortError } from './errors.js';
export type { KilnErrorCode } from './errors.js';
export type { CacheEntry, CacheEvent, ModelCache } from './cache.js';
export type { GenerateOptions, GenerationStats, Completion, ChatMessage, ChatOptions } from './generate.js';
export { TrainController, TrainedModel } from './train.js';
export type { TrainOptions, TrainProgress } from './train.js';
