"""Generated portraits: the Renderer model stage (diffusers SDXL, ControlNets, IP-Adapter, LoRAs)."""
